"""crc.protocol.known_gaps: the pairs ``crc simulate`` warns are far from RC, or worse than naive Bayes, in the setting
they were measured in."""

import json
from pathlib import Path

from crc.protocol import known_gaps
from crc.protocol.config import SimulationConfig


def test_a_known_pair_warns_in_its_measured_setting_only(monkeypatch):
    monkeypatch.setitem(known_gaps.KNOWN_GAPS, ("letter", "pc/mixture", "accelerated"), 0.05)
    config = SimulationConfig.from_settings(data="letter", model="pc")
    assert known_gaps.known_gap(config) == 0.05
    warning = known_gaps.far_from_rc_warning(config)
    assert "pc (mixture) on letter under the accelerated algorithm ends about +0.050 above" in warning
    assert warning.endswith("(the mean of 3 repeats, results/models/gaps.md: one run's gap varies around it)")
    for other in ({"components": 4}, {"rounds": 256}, {"nodes": 10}, {"topology": "complete"}, {"start": "local"},
                  {"data": "magic"}, {"structure": "region-graph"}, {"secure_aggregation": True, "sum_over": "network"}):
        assert known_gaps.far_from_rc_warning(SimulationConfig.from_settings(**{"data": "letter", "model": "pc", **other})) is None, other
    assert known_gaps.known_gap(SimulationConfig.from_settings(data="letter", model="nb")) is None
    paper = known_gaps.far_from_rc_warning(SimulationConfig.from_settings(data="letter", model="qda", algorithm="paper"))
    assert paper.endswith("the accelerated algorithm (the default) does better")


def test_every_listed_gap_is_far_and_names_an_algorithm():
    for (_data, model, algorithm), gap in known_gaps.KNOWN_GAPS.items():
        assert gap > known_gaps.FAR and algorithm in ("accelerated", "paper") and model in ("nb", "qda", "pc/mixture", "pc/region-graph")


def _measured_runs() -> dict:
    """(data set, model key, algorithm) -> results of every run of results/models/json (``sh results/models/measure.sh``)."""
    root = Path(__file__).resolve().parents[2] / "results" / "models" / "json"
    keys = {"nb": "nb", "qda": "qda", "mixture": "pc/mixture", "region-graph": "pc/region-graph"}
    runs = {}
    for path in root.glob("*.json"):
        data, rest = path.stem.split("-", 1)
        model, algorithm = rest.rsplit("-", 1)
        runs[(data, keys[model], algorithm)] = json.loads(path.read_text())
    return runs


def test_the_listed_gaps_are_the_measured_ones_above_far():
    """Every measured run whose gap is above ``FAR`` is listed with its gap to three decimals, and nothing else is."""
    measured = {key: round(run["test_gap"], 3) for key, run in _measured_runs().items() if run["test_gap"] > known_gaps.FAR}
    assert len(measured) >= 10
    assert {key: round(gap, 3) for key, gap in known_gaps.KNOWN_GAPS.items()} == measured


def test_the_listed_nb_better_pairs_are_the_measured_ones():
    """Every measured run whose RC beats naive Bayes' RC but whose CRC is clearly worse than naive Bayes' CRC (same data
    set and algorithm) is listed with both CRC errors to three decimals, and nothing else is."""
    runs = _measured_runs()
    measured = {}
    for (data, model, algorithm), run in runs.items():
        nb = runs[(data, "nb", algorithm)]
        tested = run["evaluation"]["test_instances"] * run["config"]["repeats"]
        if (model != "nb" and run["rc"]["test_error"] < nb["rc"]["test_error"]
                and known_gaps.clearly_worse(run["crc"]["test_error"], nb["crc"]["test_error"], tested)):
            measured[(data, model, algorithm)] = (round(run["crc"]["test_error"], 3), round(nb["crc"]["test_error"], 3))
    assert ("texture", "pc/region-graph", "accelerated") in measured
    assert measured == known_gaps.NB_BETTER


def test_clearly_worse_needs_more_than_two_standard_errors():
    assert known_gaps.clearly_worse(0.054, 0.032, 4125)
    assert not known_gaps.clearly_worse(0.035, 0.032, 4125)
    assert not known_gaps.clearly_worse(0.032, 0.054, 4125)
    assert known_gaps.clearly_worse(0.035, 0.032, 400_000)


def test_an_nb_better_pair_warns_in_its_measured_setting_only():
    config = SimulationConfig.from_settings(data="texture", model="pc", structure="region-graph")
    warning = known_gaps.nb_better_warning(config)
    assert warning.startswith("pc (region-graph) on texture under the accelerated algorithm ends worse under CRC than "
                              "naive Bayes under CRC")
    assert "0.054 against 0.032" in warning and warning.endswith("--model nb is the better choice here")
    paper = known_gaps.nb_better_warning(SimulationConfig.from_settings(data="letter", model="qda", algorithm="paper"))
    assert paper is None
    paper = known_gaps.nb_better_warning(SimulationConfig.from_settings(data="satimage", model="qda", algorithm="paper"))
    assert "0.271 against 0.165" in paper and paper.endswith("under the accelerated algorithm (the default) it is not")
    for other in ({"structure": "mixture"}, {"rounds": 128}, {"data": "letter"}, {"nodes": 10}):
        settings = {"data": "texture", "model": "pc", "structure": "region-graph", **other}
        assert known_gaps.nb_better_warning(SimulationConfig.from_settings(**settings)) is None, other
