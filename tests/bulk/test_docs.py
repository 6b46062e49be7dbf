"""docs/bulk.md lists every argument and flag of `spinfc score`, with the parser's default, in its tables."""

import argparse

from spinfc.bulk.options import configure_parser

from .paths import ROOT


def _table_rows() -> dict[str, str]:
    """The first cell of each table row of docs/bulk.md's flag tables -> the row."""
    rows = {}
    for line in (ROOT / "docs" / "bulk.md").read_text().splitlines():
        if line.startswith("| `") and line.count("|") >= 4:
            rows[line.split("|")[1].strip()] = line
    return rows


def test_every_flag_of_spinfc_score_has_a_row_in_docs_bulk():
    parser = argparse.ArgumentParser()
    configure_parser(parser)
    rows = _table_rows()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = action.option_strings or [action.metavar]
        cell = next((cell for cell in rows if any(f"`{name}" in cell for name in names)), None)
        assert cell is not None, f"docs/bulk.md has no table row for {'/'.join(names)}"
        if isinstance(action.default, int) and not isinstance(action.default, bool):
            assert f"{action.default:,}" in rows[cell] or str(action.default) in rows[cell], (names, rows[cell])
