import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crc.core.calibration import rc
from crc.core.errors import CRCError
from crc.core.model_file import TrainedModel, load_model
from crc.core.models import make_model
from support.tables import mixed_columns, prepared

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
HOSTILE = st.one_of(st.none(), st.booleans(), st.integers(-10**19, 10**19), st.sampled_from([1e308, -1e308, 5e-324, 0.0, -1.0]),
                    st.text(max_size=5), st.just([]), st.just({}), st.just([True] * 3), st.just([[1.0]]))


def trained(kind: str = "nb", **options) -> TrainedModel:
    schema, x, y = prepared(mixed_columns(120))
    model = make_model(kind, schema, **options)
    phi = model.features(x)
    return TrainedModel(schema, kind, rc(model, phi, y, iterations=3).stats, {"rounds_done": 3}, **options)


@pytest.fixture(scope="module")
def valid():
    return {"nb": trained().to_json(), "pc": trained("pc", components=2).to_json()}


def paths(value, prefix=()):
    """Every key/index path in a parsed JSON value."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3] + value[-2:] if len(value) > 5 else value):
            yield from paths(item, prefix + (value.index(item) if len(value) <= 5 else index,))


def mutated(obj, path, change):
    obj = json.loads(json.dumps(obj))
    if not path:
        return change(obj)
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    if change is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = change(parent[path[-1]])
    return obj


def assert_loads_or_refuses(path):
    """A model that predicts, or a one-line CRCError naming the file; any other exception fails the test."""
    try:
        model = load_model(path)
    except CRCError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc), str(exc)
        return None
    assert np.all(np.isfinite(model.stats)) and model.stats.shape == (model.model.size,)
    return model


@SETTINGS
@given(kind=st.sampled_from(["nb", "pc"]), data=st.data(), action=st.sampled_from(["remove", "retype", "nest"]))
def test_a_model_file_with_a_field_removed_retyped_or_nested_loads_correctly_or_is_refused(valid, tmp_path, kind, data, action):
    obj = valid[kind]
    path = data.draw(st.sampled_from([p for p in paths(obj) if p and not (action == "remove" and isinstance(p[-1], int))]))
    if action == "remove":
        obj = mutated(obj, path, None)
    elif action == "retype":
        value = data.draw(HOSTILE)
        obj = mutated(obj, path, lambda _: value)
    else:
        obj = mutated(obj, path, lambda old: [old])
    (tmp_path / "m.json").write_text(json.dumps(obj))
    assert_loads_or_refuses(tmp_path / "m.json")


@SETTINGS
@given(kind=st.sampled_from(["nb", "pc"]), data=st.data(), token=st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "1" * 30]))
def test_non_finite_and_overlong_numbers_anywhere_are_refused(valid, tmp_path, kind, data, token):
    text = json.dumps(valid[kind])
    numbers = [i for i in range(1, len(text)) if text[i].isdigit() and not text[i - 1].isalnum() and text[i - 1] not in '."-']
    at = data.draw(st.sampled_from(numbers))
    end = at
    while end < len(text) and text[end] in "0123456789.eE+-":
        end += 1
    (tmp_path / "m.json").write_text(text[:at] + token + text[end:])
    assert assert_loads_or_refuses(tmp_path / "m.json") is None


@SETTINGS
@given(kind=st.sampled_from(["nb", "pc"]), data=st.data())
def test_a_truncated_or_corrupted_model_file_is_refused_or_still_valid(valid, tmp_path, kind, data):
    raw = bytearray(json.dumps(valid[kind]).encode())
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    (tmp_path / "m.json").write_bytes(bytes(raw))
    assert_loads_or_refuses(tmp_path / "m.json")


@SETTINGS
@given(raw=st.binary(max_size=300))
def test_random_bytes_are_refused(tmp_path, raw):
    (tmp_path / "m.json").write_bytes(raw)
    assert assert_loads_or_refuses(tmp_path / "m.json") is None


def test_a_valid_file_round_trips_exactly(valid, tmp_path):
    for kind, obj in valid.items():
        (tmp_path / f"{kind}.json").write_text(json.dumps(obj))
        model = load_model(tmp_path / f"{kind}.json")
        np.testing.assert_array_equal(model.stats, obj["statistics"])


@pytest.mark.parametrize("kind", ["nb", "qda"])
def test_a_model_of_discrete_features_only_round_trips(tmp_path, kind):
    """QDA without a continuous feature (a vertical group's block of categorical features) has 0 x 0 precisions, which
    JSON writes as [[], ...]: read back as (r, 0), they were refused as 'not what its statistics give'."""
    columns = {name: cells for name, cells in mixed_columns(120).items() if name in ("d0", "d1", "label")}
    schema, x, y = prepared(columns)
    model = make_model(kind, schema)
    stats = rc(model, model.features(x), y, iterations=3).stats
    TrainedModel(schema, kind, stats, {}).save(tmp_path / "m.json")
    np.testing.assert_array_equal(load_model(tmp_path / "m.json").stats, stats)


@pytest.mark.parametrize("edit, message", [
    (lambda o: o.update(statistics=[True] * len(o["statistics"])), r"'statistics' must be a list of finite numbers, got true at \[0\]"),
    (lambda o: o["statistics"].__setitem__(0, "1"), r"got '1' at \[0\]"),
    (lambda o: o.update(statistics=o["statistics"] + [1.0]), "'statistics' must hold"),
    (lambda o: o.update(options={"components": 10**9}), "model option 'components' must lie in"),
    (lambda o: o.update(options={"components": True}), "model option 'components' must be of type int"),
    (lambda o: o.update(options={"depth": 3}), "does not take the option"),
    (lambda o: o.update(options=[2]), "'options' must be an object"),
    (lambda o: o.update(model=["pc"]), r"unknown model kind a list of 1 entries"),
    (lambda o: o["schema"]["features"][0].update(std=True), r"features\[0\].std must be a finite number, got true"),
    (lambda o: o["schema"]["features"][0].update(mean=None), r"features\[0\].mean must be a finite number, got null"),
    (lambda o: o["schema"].update(classes=["k0", "k1", 2]), r"classes\[2\] must be a string"),
    (lambda o: o.update(ess=o["ess"] * 2), "'ess' .* is not the equivalent sample size of its statistics"),
    (lambda o: o.update(ess=False), "'ess' must be a finite number, got false"),
    (lambda o: o.update(metrics=[]), "'metrics' must be an object"),
    (lambda o: o.update(label_dtype=7), "label_dtype 7 is not a boolean, integer, float or string dtype"),
    (lambda o: o.update(schema_id="0" * 64), "schema id does not match"),
    (lambda o: o.update(statistics=[1e308] * len(o["statistics"])), "non-finite parameters|non-positive|statistics"),
    (lambda o: o["parameters"]["var"][0].__setitem__(0, -1.0), "'parameters' 'var' are not what its statistics give"),
    (lambda o: o["parameters"].pop("log_prior"), "'parameters' hold .* this model's are"),
    (lambda o: o["parameters"].update(var="big"), "'parameters' 'var' are not what"),
    (lambda o: o["parameters"]["var"].append(o["parameters"]["var"][0]), "'parameters' 'var' are not what"),
    (lambda o: o.update(parameters=[]), "'parameters' must be an object"),
])
def test_each_damage_is_named_in_one_line(valid, tmp_path, edit, message):
    obj = json.loads(json.dumps(valid["pc"]))
    edit(obj)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(obj))
    with pytest.raises(CRCError, match=message) as raised:
        load_model(path)
    assert str(raised.value).startswith(f"{path}: ") and "\n" not in str(raised.value)


def test_extreme_but_finite_statistics_never_give_non_finite_predictions(valid, tmp_path):
    obj = json.loads(json.dumps(valid["nb"]))
    obj["statistics"] = [v * 1e300 for v in obj["statistics"]]
    obj.pop("ess")
    path = tmp_path / "m.json"
    path.write_text(json.dumps(obj))
    model = assert_loads_or_refuses(path)
    if model is not None:
        columns = mixed_columns(20, seed=3)
        assert np.all(np.isfinite(model.predict_proba(columns)))


def test_a_small_file_asking_for_a_huge_model_is_refused_fast_and_small(valid, tmp_path):
    """The audit's case: a 7 KB model file with a huge option once drove crc predict past 8.6 GB."""
    obj = json.loads(json.dumps(valid["pc"]))
    obj["options"]["components"] = 2**40
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(obj))
    # a fresh interpreter that only runs the command: its children's peak RSS and CPU time are the command's own
    # (CPU time, not wall time: a loaded machine slows the start-up, not the work done)
    measure = "import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; " \
              "usage = resource.getrusage(resource.RUSAGE_CHILDREN); " \
              "print(usage.ru_maxrss, usage.ru_utime + usage.ru_stime); sys.exit(code)"
    result = subprocess.run([sys.executable, "-c", measure, sys.executable, "-I", "-m", "crc", "predict", "--model-file", str(path),
                             "--data", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "components" in result.stderr
    peak_kib, cpu_s = result.stdout.split()
    assert "Traceback" not in result.stderr and float(cpu_s) < 10  # a fresh interpreter's start-up included
    assert int(peak_kib) < 200 * 1024
