"""crc.protocol.known_gaps: the pairs ``crc simulate`` warns are far from RC, in the setting they were measured in."""

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
                  {"data": "magic"}, {"structure": "region-graph"}):
        assert known_gaps.far_from_rc_warning(SimulationConfig.from_settings(**{"data": "letter", "model": "pc", **other})) is None, other
    assert known_gaps.known_gap(SimulationConfig.from_settings(data="letter", model="nb")) is None
    paper = known_gaps.far_from_rc_warning(SimulationConfig.from_settings(data="letter", model="qda", algorithm="paper"))
    assert paper.endswith("the accelerated algorithm (the default) does better")


def test_every_listed_gap_is_far_and_names_an_algorithm():
    for (_data, model, algorithm), gap in known_gaps.KNOWN_GAPS.items():
        assert gap > known_gaps.FAR and algorithm in ("accelerated", "paper") and model in ("nb", "qda", "pc/mixture", "pc/region-graph")


def test_the_listed_gaps_are_the_measured_ones_above_far():
    """Every run of results/models/json (``sh results/models/measure.sh``) whose gap is above ``FAR`` is listed with
    its gap to three decimals, and nothing else is."""
    root = Path(__file__).resolve().parents[2] / "results" / "models" / "json"
    keys = {"nb": "nb", "qda": "qda", "mixture": "pc/mixture", "region-graph": "pc/region-graph"}
    measured = {}
    for path in root.glob("*.json"):
        data, rest = path.stem.split("-", 1)
        model, algorithm = rest.rsplit("-", 1)
        gap = json.loads(path.read_text())["test_gap"]
        if gap > known_gaps.FAR:
            measured[(data, keys[model], algorithm)] = round(gap, 3)
    assert len(measured) >= 10
    assert {key: round(gap, 3) for key, gap in known_gaps.KNOWN_GAPS.items()} == measured
