"""The committed tables' CSV and Markdown are what the report code renders from their committed JSON (they went
stale once, when the CSV rounding and the circuits table's footnote changed without a re-render)."""

from pathlib import Path

import pytest

from crc.core.files import read_json
from crc.report.tables import table_csv, table_markdown

RESULTS = Path(__file__).resolve().parents[2] / "results"
TABLES = sorted(RESULTS.glob("*.json"))


@pytest.mark.skipif(not TABLES, reason="needs the checkout's results/")
@pytest.mark.parametrize("source", TABLES, ids=lambda path: path.stem)
def test_committed_csv_and_markdown_are_rendered_from_the_committed_json(source):
    table = read_json(source)
    assert source.with_suffix(".csv").read_text() == table_csv(table)
    assert source.with_suffix(".md").read_text() == table_markdown(table)
