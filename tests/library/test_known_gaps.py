"""crc.protocol.known_gaps: the pairs ``crc simulate`` warns are far from RC, in the setting they were measured in."""

from crc.protocol import known_gaps
from crc.protocol.config import SimulationConfig


def test_a_known_pair_warns_in_its_measured_setting_only(monkeypatch):
    monkeypatch.setitem(known_gaps.KNOWN_GAPS, ("letter", "pc/mixture", "accelerated"), 0.05)
    config = SimulationConfig.from_settings(data="letter", model="pc")
    assert known_gaps.known_gap(config) == 0.05
    assert "pc (mixture) on letter under the accelerated algorithm ends about +0.050 above" in known_gaps.far_from_rc_warning(config)
    for other in ({"components": 4}, {"rounds": 256}, {"nodes": 10}, {"topology": "complete"}, {"start": "local"},
                  {"data": "magic"}, {"structure": "region-graph"}):
        assert known_gaps.far_from_rc_warning(SimulationConfig.from_settings(**{"data": "letter", "model": "pc", **other})) is None, other
    assert known_gaps.known_gap(SimulationConfig.from_settings(data="letter", model="nb")) is None
    paper = known_gaps.far_from_rc_warning(SimulationConfig.from_settings(data="letter", model="qda", algorithm="paper"))
    assert paper.endswith("the accelerated algorithm (the default) does better")


def test_every_listed_gap_is_far_and_names_an_algorithm():
    for (_data, model, algorithm), gap in known_gaps.KNOWN_GAPS.items():
        assert gap > known_gaps.FAR and algorithm in ("accelerated", "paper") and model in ("nb", "qda", "pc/mixture", "pc/region-graph")
