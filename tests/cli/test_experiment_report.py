import json

from click.testing import CliRunner

from crc.cli.main import main
from crc.report.sources import run_name

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_experiment_writes_the_table_files_and_reports_progress(tmp_path):
    grid = ["experiment", "table12", "--datasets", "twonorm", "--repeats", "1", "--no-rc-converged"]  # not read here
    result = run(*grid, "--out", tmp_path)
    assert result.exit_code == 0, result.output
    assert "5 cells: 5 to run, 0 already done, 0 n/a" in result.stderr
    assert "[5/5] table12 twonorm" in result.stderr
    assert f"{tmp_path}/table12.md" in result.stdout
    table = json.loads((tmp_path / "table12.json").read_text())
    assert [c["header"] for c in table["columns"]] == ["∞", "8", "4", "2", "1"]
    assert all(0 <= cell["crc_test_error"] <= 1 for cell in table["rows"][0]["cells"].values())
    again = run(*grid, "--out", tmp_path)
    assert "0 to run, 5 already done" in again.stderr


def test_experiment_refuses_unknown_names():
    result = run("experiment", "table1")
    assert result.exit_code == 2 and "choose from table2" in result.output


def test_report_renders_runs_and_tables_and_draws_figures(tmp_path):
    simulated = run("simulate", "--data", "twonorm", "--nodes", "5", "--local-size", "20", "--rounds", "5", "--curve", "--json")
    assert simulated.exit_code == 0, simulated.output
    (tmp_path / "run.json").write_text(simulated.stdout)
    assert run("experiment", "table4", "--datasets", "twonorm", "--repeats", "1", "--out", tmp_path / "res").exit_code == 0
    result = run("report", tmp_path / "run.json", tmp_path / "res" / "table4.json", "--plots", tmp_path / "png")
    assert result.exit_code == 0, result.output
    assert "| twonorm | nb | tree | iid | 5 | 20 | 5 |" in result.stdout
    assert "# table4: Test gap CRC - RC by sparse topology" in result.stdout
    for name in ("convergence.png", "table4-gap-density.png"):
        assert (tmp_path / "png" / name).read_bytes().startswith(PNG_SIGNATURE)
    as_csv = run("report", tmp_path / "run.json", "--format", "csv")
    assert as_csv.stdout.splitlines()[0].startswith("data,model,topology,partition,n,m_v,rounds,ml_test")
    majority = json.loads(simulated.stdout)["majority"]["test_error"]
    assert result.stdout.splitlines()[0].endswith("| test gap to RC conv. | majority test |")
    assert f"| {majority:.3f} |" in result.stdout.splitlines()[2] and 0.3 < majority < 0.7  # twonorm: two even classes
    assert as_csv.stdout.splitlines()[1].split(",")[-1] == f"{majority:.6g}"


def simulated_and_reported(tmp_path, *options) -> tuple[dict, str]:
    """(the results JSON, ``crc report``'s output) of a short ``crc simulate`` run with ``options``."""
    simulated = run("simulate", *options, "--no-rc-converged", "--json")
    assert simulated.exit_code == 0, simulated.output
    (tmp_path / "run.json").write_text(simulated.stdout)
    result = run("report", tmp_path / "run.json")
    assert result.exit_code == 0, result.output
    return json.loads(simulated.stdout), result.stdout


def test_a_vertical_run_is_reported_without_a_graph_of_groups(tmp_path):
    _, report = simulated_and_reported(tmp_path, "--data", "wdbc", "--partition", "vertical:2", "--rounds", "2")
    assert "| wdbc | nb | – | vertical:2 | 1 |" in report


def test_a_network_sum_run_is_reported_as_one_on_its_graph(tmp_path):
    results, report = simulated_and_reported(tmp_path, "--data", "twonorm", "--nodes", "5", "--local-size", "20",
                                             "--rounds", "2", "--secure-aggregation", "--sum-over", "network")
    assert "| twonorm | nb | tree (network sum) | iid | 5 | 20 | 2 |" in report
    assert run_name(results) == "twonorm nb tree network sum"  # its curve's name in a figure


def test_a_circuit_run_is_reported_with_its_structure(tmp_path):
    results, report = simulated_and_reported(tmp_path, "--data", "wdbc", "--model", "pc", "--structure", "region-graph",
                                             "--nodes", "3", "--local-size", "20", "--rounds", "2")
    assert "| wdbc | pc (region-graph) | tree | iid | 3 | 20 | 2 |" in report
    assert run_name(results) == "wdbc pc (region-graph) tree"  # its curve's name in a figure
    damaged = results
    damaged["config"]["structure"] = ["region-graph"]
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    result = run("report", tmp_path / "damaged.json")
    assert result.exit_code == 1 and "config.structure" in result.output and "Traceback" not in result.output


def test_report_rejects_files_that_are_not_results(tmp_path):
    (tmp_path / "bad.json").write_text('{"hello": 1}')
    (tmp_path / "broken.json").write_text("[1, 2")
    for name, message in (("bad.json", "not a crc results file"), ("broken.json", "not valid JSON")):
        result = run("report", tmp_path / name)
        assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


def test_report_says_when_there_is_nothing_to_plot(tmp_path):
    simulated = run("simulate", "--data", "twonorm", "--nodes", "5", "--local-size", "20", "--rounds", "3", "--json")
    (tmp_path / "run.json").write_text(simulated.stdout)
    result = run("report", tmp_path / "run.json", "--plots", tmp_path / "png")
    assert result.exit_code == 1 and "nothing to plot" in result.output
