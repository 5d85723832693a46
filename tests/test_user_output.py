"""Tables of text, one way (workbench.user_output.text_table): every command's and benchmark's table."""

from __future__ import annotations

from workbench.user_output import table_cell, text_table


def test_columns_are_as_wide_as_their_widest_cell_two_spaces_apart():
    rows = [["model", "n", "rate"], ["base", "31", table_cell(0.25)], ["a-longer-name", "7", table_cell(None)]]
    assert text_table(rows) == ["model          n   rate", "base           31  0.250", "a-longer-name  7   -"]
    assert text_table(rows, right=(1,), indent="  ") == [
        "  model           n  rate",
        "  base           31  0.250",
        "  a-longer-name   7  -",
    ]
    assert text_table([]) == []
