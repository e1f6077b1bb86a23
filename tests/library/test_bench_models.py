"""``crc bench``'s models part: naive Bayes beside a slower model, interleaved, with the ratio and the target."""

import json

from click.testing import CliRunner

from crc.bench import MODEL_CASES, models_versus_nb
from crc.cli.main import main

SMALL = {"nodes": 4, "local_size": 25, "rounds": 2, "rc_converged": False}


def test_models_part_times_both_models_of_each_case():
    cases = (("twonorm", {"model": "qda"}, 5.0), ("banana", {"model": "pc", "structure": "region-graph"}, 10.0))
    report = models_versus_nb(2, 0, cases, **SMALL)
    assert "best of 2" in report["timing"]
    assert [(case["data"], case["model"], case["target_ratio"]) for case in report["cases"]] == [c for c in cases]
    for case in report["cases"]:
        assert case["nodes"] == 4 and case["rounds"] == 2
        for side in ("nb", "other"):
            assert case[side]["seconds"] > 0 and case[side]["cpu_seconds"] >= 0 and 0 <= case[side]["test_error"] <= 1
        assert case["ratio"] == case["other"]["seconds"] / case["nb"]["seconds"]
        assert case["meets_target"] == (case["ratio"] <= case["target_ratio"])


def test_the_issue_targets_are_the_default_cases():
    assert [(data, options["model"], target) for data, options, target in MODEL_CASES] == [("letter", "pc", 10.0),
                                                                                          ("optdigits", "qda", 5.0)]


def test_bench_writes_its_json_to_out(tmp_path, monkeypatch):
    calls = []

    def fake(repeats, seed):
        calls.append((repeats, seed))
        return {"cases": [], "timing": "fake"}

    monkeypatch.setattr("crc.bench.suite.models_versus_nb", fake)  # what `crc bench` imports when it runs
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(main, ["bench", "--only", "models", "--repeats", "2", "--seed", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert calls == [(2, 3)]
    assert json.loads(out.read_text()) == json.loads(result.stdout) == {"models": {"cases": [], "timing": "fake"}}
