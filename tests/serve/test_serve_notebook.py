"""The notebook helpers inside a real Jupyter kernel (headless): the side-by-side cell renders HTML."""

from __future__ import annotations

import json

import nbclient  # test tools (pyproject's test extra): missing, this test fails rather than skips
import nbformat


def test_compare_and_chat_cells_in_a_kernel():
    cells = [
        "import sys\n"
        "from workbench.serve import start_server\n"
        "from workbench.serve.client import chat, compare\n"
        "imported_widgets = 'ipywidgets' in sys.modules\n"
        "srv = start_server('tiny-glm4', default_max_tokens=6)",
        "replies = compare('Hello?', server=srv)",
        "reply = chat('tiny-glm4', 'Hello?', server=srv)",
        "import html, json\n"
        "print(json.dumps({'models': sorted(replies), 'compared': html.escape(str(replies['tiny-glm4'])),\n"
        "                  'content': reply.content, 'widgets': imported_widgets}))\n"
        "srv.stop()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3").execute()
    compare_out = nb.cells[1].outputs
    html = [o for o in compare_out if "text/html" in o.get("data", {})]
    assert html and "<table" in html[-1]["data"]["text/html"] and "tiny-glm4" in html[-1]["data"]["text/html"]
    chat_text = "".join(o.get("text", "") for o in nb.cells[2].outputs if o.get("output_type") == "stream")
    seen = json.loads(nb.cells[3].outputs[0]["text"])
    assert seen["models"] == ["tiny-glm4"] and seen["widgets"] is False
    # what chat() streamed into the cell is the answer it returned; the table shows the answer compare() returned
    assert seen["content"].strip() and seen["content"].strip() in chat_text, (seen, chat_text)
    assert seen["compared"] in html[-1]["data"]["text/html"], seen
