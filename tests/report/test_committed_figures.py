"""`crc report --plots` draws every committed table's figures, a PNG and a PDF each (pixels are not checked),
and results/plots holds exactly those figures."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from crc.cli.main import main

RESULTS = Path(__file__).resolve().parents[2] / "results"
EXPECTED = {
    "table2": "gap-size", "table3": "convergence", "table4": "gap-density", "table5": "gap-density",
    "table6": "gap-density", "table7": "gap-density", "table8": "gap-local-size", "table9": "gap-nodes",
    "table10": "gap-nodes", "table11": "convergence", "table12": "gap-period", "circuits": "errors",
    "fedpc": "accuracy", "blocks": "accuracy",
}
"""Each committed table and the figure its kind draws for it."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def expected_files() -> set[str]:
    return {f"{table}-{figure}.{suffix}" for table, figure in EXPECTED.items() for suffix in ("png", "pdf")}


@pytest.mark.skipif(not (RESULTS / "table2.json").exists(), reason="needs the checkout's results/")
def test_report_plots_writes_a_png_and_a_pdf_for_every_committed_table(tmp_path):
    files = sorted(str(path) for path in RESULTS.glob("*.json"))
    assert {Path(f).stem for f in files} == set(EXPECTED)
    result = CliRunner().invoke(main, ["report", *files, "--plots", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = {path.name for path in tmp_path.iterdir()}
    assert written == expected_files()
    for name in written:
        head = (tmp_path / name).read_bytes()[:8]
        assert head.startswith(PNG_SIGNATURE if name.endswith(".png") else b"%PDF"), name
    assert sorted(line.removeprefix("wrote ") for line in result.stderr.splitlines()) == sorted(
        str(tmp_path / name) for name in written)


@pytest.mark.skipif(not (RESULTS / "plots").exists(), reason="needs the checkout's results/")
def test_the_committed_figures_are_the_ones_report_draws():
    assert {path.name for path in (RESULTS / "plots").iterdir()} == expected_files()
