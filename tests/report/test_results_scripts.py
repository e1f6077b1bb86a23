"""The scripts that render results/ tables outside ``crc report`` (results/byzantine_table.py,
results/network/table.py, results/network/chaos_table.py): they render a figure of their input where it belongs,
and the committed Markdown and CSV are what they render from the committed runs."""

import importlib.util
import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "results"


def script(path: Path):
    """The module of the script at ``path``, imported without running its main."""
    spec = importlib.util.spec_from_file_location(f"results_script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def byzantine_run(data: str, byzantine: int, attack: str, aggregate: str, honest: float) -> dict:
    return {"config": {"data": data, "byzantine": byzantine, "attack": attack, "aggregate": aggregate},
            "rc": {"test_error": 0.23813}, "crc": {"test_error": honest, "test_std": 0.01}}


@pytest.mark.skipif(not (RESULTS / "byzantine_table.py").exists(), reason="needs the checkout's results/")
def test_the_byzantine_table_puts_each_runs_honest_error_in_its_cell(tmp_path):
    written = (RESULTS / "byzantine.md").stat().st_mtime_ns
    table = script(RESULTS / "byzantine_table.py")
    assert (RESULTS / "byzantine.md").stat().st_mtime_ns == written  # importing it writes nothing
    runs = [byzantine_run("letter", 0, "permute", "mean", 0.31), byzantine_run("letter", 0, "permute", "clipped", 0.32),
            byzantine_run("letter", 2, "noise", "clipped", 0.456789)]
    for at, run in enumerate(runs):
        (tmp_path / f"{at}.json").write_text(json.dumps(run))
    rows = table.read_rows(tmp_path)
    text = table.markdown(rows, {})
    assert "## letter (RC test error 0.2381)" in text
    assert "| 0 | 0.3100 / 0.3200 | | |" in text
    assert "| 2 | – / – | – / – | – / 0.4568 |" in text
    assert "Real peers" not in text
    assert table.table_csv(rows).splitlines()[1] == "letter,0,none,clipped,0.32,0.01,0.2381"


@pytest.mark.skipif(not (RESULTS / "network" / "network-paper.json").exists(), reason="needs the checkout's results/")
def test_the_network_table_shows_each_scenarios_wall_time_and_gap_of_the_runs_present(tmp_path):
    table = script(RESULTS / "network" / "table.py")
    source = RESULTS / "network" / "network-paper.json"
    (tmp_path / source.name).write_text(source.read_text())
    partition = json.loads(source.read_text())["network"]["scenarios"]["partition"]
    text = table.render(tmp_path)
    assert text.count("\n## ") == 1 and "## The paper's algorithm, partition only" in text
    row = next(line for line in text.splitlines() if line.startswith("| partition |"))
    assert row.startswith(f"| partition | {partition['wall_s']:.1f} |")
    assert f"| {partition['test_gap']:+.4f} | {partition['gap_vs_wan']:+.4f} |" in row


@pytest.mark.skipif(not (RESULTS / "byzantine").is_dir(), reason="needs the checkout's results/")
def test_the_committed_byzantine_and_network_tables_are_rendered_from_the_committed_runs():
    byzantine = script(RESULTS / "byzantine_table.py")
    rows = byzantine.read_rows(RESULTS / "byzantine")
    assert (RESULTS / "byzantine.md").read_text() == byzantine.markdown(rows, byzantine.read_launches(RESULTS / "byzantine-launch"))
    assert (RESULTS / "byzantine.csv").read_bytes().decode() == byzantine.table_csv(rows)
    assert (RESULTS / "network" / "network.md").read_text() == script(RESULTS / "network" / "table.py").render(RESULTS / "network")


@pytest.mark.skipif(not (RESULTS / "network" / "chaos").is_dir(), reason="needs the checkout's results/")
def test_the_chaos_table_shows_each_runs_wall_time_and_releases_and_is_the_committed_one(tmp_path):
    table = script(RESULTS / "network" / "chaos_table.py")
    source = RESULTS / "network" / "chaos" / "sa-restart.json"
    run = json.loads(source.read_text())
    (tmp_path / source.name).write_text(source.read_text())
    row = next(line for line in table.render(tmp_path).splitlines() if line.startswith("| `sa-restart` |"))
    assert row.startswith(f"| `sa-restart` | {run['wall_s']:.1f} | 6/6 |")
    assert f"| {run['released_twice']} / {run['victim_rounds_seen']} |" in row
    assert (RESULTS / "network" / "chaos.md").read_text() == table.render(RESULTS / "network" / "chaos")
