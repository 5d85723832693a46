"""The runs panel's table (issue 22 item 5: a long run name is cut short in the table, whole in its tooltip)."""

import html
import re

from workbench.bench.long_run import write_log
from workbench.ui.runs_panel import RunsPanel


def test_a_long_run_name_is_whole_in_its_tooltip(tmp_path):
    name = "phone-actions-smollm2-lr1e-3-microbatch4x2-" + "x" * 60
    write_log(tmp_path / name, 5)
    panel = RunsPanel(str(tmp_path))
    cell = re.search(r"<td class='wb-run-name' title='([^']*)' style='([^']*)'>", panel.table.value)
    assert cell and html.unescape(cell.group(1)) == name
    assert "text-overflow:ellipsis" in cell.group(2)
    assert [r.step for r in panel.runs] == [5]
