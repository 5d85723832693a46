"""The notebook helpers inside a real Jupyter kernel (headless): the side-by-side cell renders HTML."""
from __future__ import annotations

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
        "print(sorted(replies), len(reply.content) > 0, imported_widgets)\n"
        "srv.stop()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3").execute()
    compare_out = nb.cells[1].outputs
    html = [o for o in compare_out if "text/html" in o.get("data", {})]
    assert html and "<table" in html[-1]["data"]["text/html"] and "tiny-glm4" in html[-1]["data"]["text/html"]
    chat_text = "".join(o.get("text", "") for o in nb.cells[2].outputs if o.get("output_type") == "stream")
    assert chat_text.strip()
    assert nb.cells[3].outputs[0]["text"].strip() == "['tiny-glm4'] True False"
