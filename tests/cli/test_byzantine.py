"""``crc simulate --byzantine K --attack A --aggregate mean|clipped``: attack studies in the simulator."""

import json

from click.testing import CliRunner

from crc.cli.main import main

RUN = ["simulate", "--json", "--data", "penbased", "--nodes", "20", "--local-size", "30", "--rounds", "24", "--no-rc-converged"]


def results(*args) -> dict:
    result = CliRunner().invoke(main, [*RUN, *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_byzantine_peers_are_seeded_and_reported_apart_and_clipping_limits_their_harm():
    clean = results()
    mean = results("--byzantine", "4", "--attack", "scale")
    clipped = results("--byzantine", "4", "--attack", "scale", "--aggregate", "clipped")
    assert "honest" not in clean
    assert mean["config"]["byzantine"] == 4 and mean["config"]["attack"] == "scale" and clipped["config"]["aggregate"] == "clipped"
    nodes = mean["repeats"][0]["byzantine_nodes"]
    assert len(set(nodes)) == 4 and nodes == clipped["repeats"][0]["byzantine_nodes"]
    assert mean["honest"]["nodes"] == clipped["honest"]["nodes"] == 16
    assert mean["honest"]["test_error"] > clean["crc"]["test_error"] + 0.1  # the attack does harm the mean
    assert clipped["honest"]["test_error"] < mean["honest"]["test_error"] - 0.1


def test_clipped_without_attack_stays_close_to_the_mean():
    """Honest neighbours beyond 2x the median distance are clipped too (small peers, early rounds): close, not equal."""
    clipped, mean = results("--aggregate", "clipped")["crc"], results()["crc"]
    assert abs(clipped["test_error"] - mean["test_error"]) < 0.005 and clipped != mean


def test_bad_byzantine_counts_are_one_line_errors():
    result = CliRunner().invoke(main, [*RUN, "--byzantine", "20"])
    assert result.exit_code == 2 and "--byzantine must be from 0 to nodes - 1 = 19" in result.output
