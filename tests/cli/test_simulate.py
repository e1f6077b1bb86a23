import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.cli.summary import summary_lines
from crc.core.errors import CRCError
from crc.protocol import SimulationConfig

SMALL = ["--nodes", "5", "--local-size", "20", "--rounds", "4"]


def run(*args):
    return CliRunner().invoke(main, list(args))


def write_csv(path, n=200, *, seed=0, extra_rows=()):
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=n)
    lines = ["f1,f2,colour,cls"]
    for v in y:
        lines.append(f"{rng.normal() + v:.5f},{rng.normal() - v:.5f},{rng.choice(['r', 'g', 'b'])},{'yes' if v else 'no'}")
    lines.extend(extra_rows)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def write_indexed(path):
    """``write_csv``'s table as pandas' DataFrame.to_csv writes it by default: an unnamed row index first."""
    lines = Path(write_csv(path)).read_text().splitlines()
    path.write_text("\n".join(["," + lines[0], *(f"{i},{line}" for i, line in enumerate(lines[1:]))]) + "\n")
    return str(path)


def test_simulate_json_on_bundled_data_has_the_contract_fields():
    result = run("simulate", "--json", "--data", "twonorm", *SMALL, "--repeats", "2", "--curve")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["config"]["nodes"] == 5 and out["config"]["ess"] == pytest.approx(20 / 0.05)
    for name in ("ml", "rc"):
        assert set(out[name]) == {"train_error", "test_error", "test_loglik", "test_f1"}
    assert set(out["crc"]) == {"train_error", "test_error", "train_std", "test_std", "test_loglik", "test_f1"}
    assert all(0 <= out[k]["test_f1"] <= 1 for k in ("ml", "rc", "crc"))
    assert out["test_gap"] == pytest.approx(out["crc"]["test_error"] - out["rc"]["test_error"])
    assert len(out["repeats"]) == 2 and [r["round"] for r in out["rounds"]] == [1, 2, 3, 4]
    assert all(0 <= out[k]["test_error"] <= 1 for k in ("ml", "rc", "crc"))


def test_simulate_csv_and_human_summary(tmp_path):
    path = write_csv(tmp_path / "d.csv")
    result = run("simulate", "--data", path, "--label", "cls", *SMALL, "--model", "qda")
    assert result.exit_code == 0, result.output
    assert "gap CRC - RC" in result.stdout and "qda" in result.stdout


def test_simulate_is_deterministic_for_a_seed(tmp_path):
    path = write_csv(tmp_path / "d.csv")
    a = json.loads(run("simulate", "--json", "--data", path, "--label", "cls", *SMALL).stdout)
    b = json.loads(run("simulate", "--json", "--data", path, "--label", "cls", *SMALL).stdout)
    assert a == b


@pytest.mark.parametrize(
    "args, message",
    [
        (["--data", "no/such/file.csv", "--label", "cls"], "no such file"),
        (["--nodes", "0"], "0 is not in the range x>=1"),
        (["--data", "banana", "--nodes", "200", "--local-size", "50"], "fewer than the 10000 training"),
        (["--data", "{csv}"], "needs --label"),
        (["--data", "twonorm", "--label", "cls"], "twonorm: a bundled data set, whose class column is 'class': "
                                                  "--label cls is for CSV files"),
        (["--data", "{csv}", "--label", "nope"], "label column 'nope' not found"),
        (["--data", "{nan}", "--label", "cls"], "nan.csv: label column 'cls' has 1 missing values"),
        (["--data", "{typo}", "--label", "cls"], "typo.csv: feature column 'f1' holds numbers but also '1.2.3' in data row 201"),
        (["--data", "{indexed}", "--label", "cls"], "indexed.csv: header has empty column names: column 1 has none (a row "
                                                    "index, as pandas' DataFrame.to_csv writes without index=False?)"),
        (["--partition", "sorted"], "'sorted' is not one of"),
        (["--partition", "dirichlet", "--alpha", "0"], "0.0 is not in the range x>0"),
        (["--nodes", "5", "--train-size", "3"], "--train-size 3 leaves some of the 5 nodes without data"),
        (["--data", "{hole}", "--label", "cls", "--model", "qda"], "hole.csv: QDA does not handle missing continuous "
                                                                  "values (1 missing (NaN) cells, first in feature 'f1')"),
    ],
)
def test_bad_input_gives_one_clear_line(tmp_path, args, message):
    files = {
        "{csv}": write_csv(tmp_path / "d.csv"),
        "{nan}": write_csv(tmp_path / "nan.csv", extra_rows=["0.1,0.2,r,"]),
        "{rare}": write_csv(tmp_path / "rare.csv", extra_rows=["0.1,0.2,r,maybe"]),
        "{typo}": write_csv(tmp_path / "typo.csv", extra_rows=["1.2.3,0.2,r,yes"]),
        "{indexed}": write_indexed(tmp_path / "indexed.csv"),
        "{hole}": write_csv(tmp_path / "hole.csv", extra_rows=[",0.2,r,yes"]),
    }
    args = [files.get(a, a) for a in args]
    result = run("simulate", *SMALL[2:], *args) if "--nodes" in args else run("simulate", *SMALL, *args)
    assert result.exit_code in (1, 2)
    assert isinstance(result.exception, SystemExit)  # a handled error, not a crash
    assert message in result.output
    assert "Traceback" not in result.output


def test_simulate_partition_and_unequal_sizes_are_reported():
    result = run("simulate", "--data", "twonorm", *SMALL, "--partition", "label", "--size-skew", "1.5", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["config"]["partition"] == "label" and out["local_sizes"]["min"] < out["local_sizes"]["max"]
    assert out["density"] == pytest.approx(4 / 10)  # a tree on 5 nodes: 4 of 10 possible edges


def test_datasets_lists_bundled_sets():
    result = run("datasets")
    assert result.exit_code == 0
    assert any(line.split()[:2] == ["letter", "20000"] for line in result.stdout.splitlines())


@pytest.mark.parametrize("args, expected", [
    ([], {"algorithm": "accelerated", "momentum": 0.0, "start": "categorical", "safeguard": False, "classifier": "averaged",
          "exact_diffusion": True, "iters": 3, "loss": 0.0, "rc_iterations": 64}),
    (["--model", "qda"], {"algorithm": "accelerated", "start": "uniform", "exact_diffusion": True, "iters": 2,
                          "classifier": "local"}),
    (["--algorithm", "paper"], {"algorithm": "paper", "momentum": 0.0, "start": "uniform", "safeguard": False,
                                "classifier": "local", "exact_diffusion": False, "iters": 1}),
    (["--algorithm", "accelerated", "--no-exact-diffusion", "--momentum", "0.5", "--safeguard", "--start", "local",
      "--iters", "1"],
     {"algorithm": "accelerated", "momentum": 0.5, "start": "local", "safeguard": True, "exact_diffusion": False, "iters": 1}),
    (["--momentum", "0.3", "--loss", "0.2", "--rc-iterations", "10"],  # momentum alone: the paper's averaging
     {"algorithm": "paper", "momentum": 0.3, "safeguard": False, "exact_diffusion": False, "iters": 1, "loss": 0.2,
      "rc_iterations": 10}),
    (["--dp-epsilon", "8"], {"algorithm": "paper", "exact_diffusion": False, "iters": 1, "dp_epsilon": 8.0}),
    (["--iters", "2", "--start", "uniform"], {"algorithm": "accelerated", "exact_diffusion": True, "iters": 2,
                                              "start": "uniform"}),
])
def test_the_algorithm_and_the_acceleration_options_reach_the_results_config(args, expected):
    result = run("simulate", "--json", "--data", "twonorm", *SMALL, *args, "--no-rc-converged")
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["config"]
    assert {key: config[key] for key in expected} == expected


def test_the_summary_names_the_algorithm_that_ran():
    default, paper = (run("simulate", "--data", "twonorm", *SMALL, "--no-rc-converged", *args)
                      for args in ([], ["--algorithm", "paper"]))
    assert default.exit_code == 0 and paper.exit_code == 0, default.output + paper.output
    assert ("algorithm accelerated: exact diffusion, categorical start, averaged category counts, 3 local steps per "
            "round") in default.stdout.splitlines()
    assert "algorithm paper: 1 local step per round" in paper.stdout.splitlines()


def test_exact_diffusion_with_momentum_is_refused_with_a_reason():
    result = run("simulate", "--data", "twonorm", *SMALL, "--algorithm", "accelerated", "--momentum", "0.5")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert ("Error: --exact-diffusion (part of --algorithm accelerated) cannot be combined with --momentum: exact diffusion "
            "corrects the averaging itself, and its statistics are its classifier; for --momentum use --algorithm paper"
            ) in result.output
    unknown = run("simulate", "--data", "twonorm", *SMALL, "--algorithm", "fast")
    assert unknown.exit_code == 2 and "Usage:" in unknown.output and "'fast' is not one of 'accelerated', 'paper'" in unknown.output


def test_the_default_simulate_ends_within_a_hundredth_of_centralized_rc_and_the_papers_algorithm_does_not():
    """The README's first command: the paper's default setting on letter, with the default algorithm."""
    default = run("simulate", "--json", "--no-rc-converged")
    assert default.exit_code == 0, default.output
    results = json.loads(default.stdout)
    assert results["config"]["data"] == "letter" and results["config"]["algorithm"] == "accelerated"
    assert abs(results["test_gap"]) <= 0.01
    paper = json.loads(run("simulate", "--json", "--no-rc-converged", "--algorithm", "paper").stdout)
    assert paper["test_gap"] > 0.05  # the paper's algorithm, the same messages: about 0.09


def test_momentum_out_of_range_is_a_usage_error():
    result = run("simulate", "--data", "twonorm", *SMALL, "--momentum", "1")
    assert result.exit_code == 2 and "0<=x<1" in result.output


@pytest.mark.parametrize("command", [["simulate"], ["launch"], ["graph"], ["split", "--out", "never"],
                                     ["experiment", "table3"], ["bench"]], ids=lambda c: c[0])
def test_a_negative_seed_is_a_usage_error(command):
    """numpy's seed sequences take no negative seed: crc simulate --seed -1 ended in a ValueError traceback."""
    result = run(*command, "--seed", "-1")
    assert result.exit_code == 2 and "Error: Invalid value for '--seed': -1 is not in the range x>=0." in result.output
    with pytest.raises(CRCError, match="--seed must be at least 0, got -1"):
        SimulationConfig(seed=-1).validate()


def test_a_data_set_too_small_for_the_test_fraction_tests_on_the_instances_left(tmp_path):
    path = write_csv(tmp_path / "small.csv", n=120)  # 5 x 20 = 100 training instances; 0.25 of 120 asks for 30 test
    result = run("simulate", *SMALL, "--data", path, "--label", "cls", "--json")
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert results["short_test_set"] == {"test": 20, "wanted": 30, "train": 100}
    assert results["evaluation"]["test_instances"] == 20
    assert (f"{path} has 120 instances for 100 training instances: the test set is the 20 left, not the 30 that "
            "--test-size 0.25 asks for") in result.stderr.splitlines()
    fits = run("simulate", *SMALL, "--data", path, "--label", "cls", "--json", "--test-size", "0.1")
    assert "short_test_set" not in json.loads(fits.stdout) and "the test set is the" not in fits.stderr
    count = run("simulate", *SMALL, "--data", path, "--label", "cls", "--test-size", "30")  # a count: in full, or refused
    assert count.exit_code == 1
    assert "data set has 120 instances, fewer than the 100 training (nodes x local size) plus 30 test instances" in count.output


@pytest.mark.parametrize("data, instances, test", [("chess", 3196, 696), ("splice", 3190, 690)])
def test_the_bundled_sets_too_small_for_the_test_fraction_run_with_the_defaults(data, instances, test):
    result = run("simulate", "--data", data, "--json", "--no-rc-converged")  # RC to convergence: 3/4 of the time, unread
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    assert results["short_test_set"] == {"test": test, "wanted": round(0.25 * instances), "train": 2500}
    assert f"{data} has {instances} instances for 2500 training instances: the test set is the {test} left" in result.stderr
    assert abs(results["test_gap"]) <= 0.01


@pytest.mark.parametrize("data, instances, local", [("wdbc", 569, 8), ("german", 1000, 15)])
def test_a_bundled_set_too_small_for_the_default_peers_gives_each_its_share(data, instances, local):
    result = run("simulate", "--data", data, "--rounds", "4", "--json")
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["config"]
    assert (config["nodes"], config["local_size"]) == (50, local)
    assert (f"{data}: {instances} instances, too few for 50 peers x 50 beside the test set: {local} instances each"
            in " ".join(result.stderr.split()))
    explicit = run("simulate", "--data", data, "--local-size", "50", "--rounds", "4")
    assert explicit.exit_code == 1 and f"data set has {instances} instances, fewer than the 2500 training" in explicit.output


def test_a_class_missing_from_the_training_split_is_a_warning_not_an_error(tmp_path):
    path = write_csv(tmp_path / "rare.csv", extra_rows=["0.1,0.2,r,maybe"])
    result = run("simulate", *SMALL, "--data", path, "--label", "cls", "--test-size", "0.5", "--seed", "1")
    assert result.exit_code == 0, result.output
    assert "Warning: class(es) 'maybe' had no training instance" in result.stderr


def test_a_warning_about_a_column_is_printed_once_though_the_table_is_read_twice(tmp_path):
    """The defaults read the table to fit the local size, then the run reads it again: the warning came twice."""
    rows = ["row,x,cls"] + [f"{i},{i % 7 / 3:.4f},{'pq'[i % 2]}" for i in range(300)]
    (tmp_path / "rows.csv").write_text("\n".join(rows) + "\n")
    result = run("simulate", "--data", str(tmp_path / "rows.csv"), "--label", "cls", "--rounds", "2", "--rc-iterations", "2",
                 "--no-rc-converged")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: feature column 'row'")]
    assert len(warnings) == 1, result.stderr


def test_qda_with_one_rare_class_says_it_is_that_class_not_the_model_that_may_do_no_better_than_chance(tmp_path):
    """A class of 3 rows among 600: the warning said QDA as a whole might do little better than chance (its test error
    was 0.11, naive Bayes' 0.11)."""
    rng = np.random.default_rng(0)
    y = ["rare"] * 3 + list(rng.choice(["a", "b", "c"], size=597))
    rows = ["f0,f1,f2,f3,cls"] + [",".join(f"{v:.4f}" for v in rng.normal(size=4) + "abcr".index(k[0])) + f",{k}" for k in y]
    (tmp_path / "rare.csv").write_text("\n".join(rows) + "\n")
    qda = run("simulate", "--data", str(tmp_path / "rare.csv"), "--label", "cls", "--nodes", "5", "--local-size", "80",
              "--rounds", "2", "--no-rc-converged", "--model", "qda", "--seed", "1")
    assert qda.exit_code == 0, qda.output
    warned = [line for line in qda.stderr.splitlines() if line.startswith("Warning: QDA")]
    assert len(warned) == 1 and warned[0].startswith(
        "Warning: QDA: 1 of 4 classes has no more training instances than the 4 continuous features, so its covariance "
        "is singular (the fewest instances: ") and "QDA may do little better than chance on it: naive Bayes" in warned[0]


def test_qda_with_no_more_training_instances_in_a_class_than_features_warns_once(tmp_path):
    """Its covariance is singular there (floored at 1e-9) and QDA may do no better than chance: it did so without a
    word (300 features, 50 training instances: test error 0.67 on three classes, naive Bayes 0.37)."""
    rng = np.random.default_rng(0)
    y = rng.integers(2, size=200)
    rows = [",".join(f"f{j}" for j in range(12)) + ",cls"]
    rows += [",".join(f"{v:.4f}" for v in rng.normal(size=12) + k) + f",{'pq'[k]}" for k in y]
    (tmp_path / "wide.csv").write_text("\n".join(rows) + "\n")
    args = ["--data", str(tmp_path / "wide.csv"), "--label", "cls", "--nodes", "4", "--local-size", "5", "--rounds", "2",
            "--rc-iterations", "2", "--no-rc-converged", "--repeats", "2"]
    qda = run("simulate", *args, "--model", "qda")
    assert qda.exit_code == 0, qda.output
    warned = [line for line in qda.stderr.splitlines() if line.startswith("Warning: QDA")]
    assert warned == ["Warning: QDA: every class has no more training instances than the 12 continuous features, so "
                      "every covariance is singular and QDA may do little better than chance: naive Bayes (--model nb), "
                      "or more training instances"]
    more = run("simulate", *args[:6], "--local-size", "40", *args[8:], "--model", "qda")
    nb = run("simulate", *args, "--model", "nb")
    assert "Warning: QDA" not in more.stderr + nb.stderr


def test_the_summary_says_a_network_sum_is_one_sum_of_all_peers_along_a_spanning_tree():
    result = run("simulate", "--data", "twonorm", *SMALL, "--topology", "chain", "--secure-aggregation",
                 "--sum-over", "network", "--dp-epsilon", "4", "--dp-noise", "distributed", "--classifier", "aggregate",
                 "--algorithm", "paper", "--no-rc-converged", "--json")
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    lines = summary_lines(results)
    assert ("secure aggregation: one sum of all 5 peers a round, which every peer averages (the relays see only masked "
            "partial sums, a round with a peer missing releases nothing): 8 masked partial/total frames along a "
            f"spanning tree of height {results['secure_aggregation']['tree_height']} (8 messages a round in plain "
            "neighbourhood averaging)") in lines
    assert any(line.endswith("; distributed: shares that add up in the network sum (one a round; --colluders 0)")
               for line in lines), lines
    assert 1 <= results["secure_aggregation"]["tree_height"] <= 4


def test_results_written_before_sum_over_existed_summarize_as_neighbourhood_sums():
    result = run("simulate", "--data", "twonorm", *SMALL, "--topology", "ring", "--secure-aggregation",
                 "--dp-epsilon", "4", "--dp-noise", "distributed", "--classifier", "aggregate", "--algorithm", "paper",
                 "--no-rc-converged", "--json")
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)
    del results["config"]["sum_over"]
    lines = summary_lines(results)
    assert any("shares that add up in every neighbourhood sum (3 sum(s) a round a peer" in line for line in lines)
    assert "secure aggregation: 100% of messages protected (50 messages a round against 10 in plain)" in lines
