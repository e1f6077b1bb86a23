"""The simulator's RC references (--rc-iterations, RC to convergence), message loss and rare classes."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.calibration import rc
from crc.core.loss import dropped, loss_seed
from crc.protocol import SimulationConfig, simulate
from crc.protocol.loss import lossy_mixing
from crc.topologies import averaging_matrix, network_factory, random_tree_graph

SMALL = {"data": "twonorm", "nodes": 5, "local_size": 20, "rounds": 4, "test_size": 300}


def test_rounds_no_longer_set_rcs_iterations_and_converged_rc_is_reported():
    network = network_factory("tree")
    short = simulate(SimulationConfig(**SMALL), network)
    longer = simulate(SimulationConfig(**{**SMALL, "rounds": 6}), network)
    assert short["rc"] == longer["rc"]  # RC runs its own 64 iterations whatever the rounds
    fewer = simulate(SimulationConfig(**SMALL, rc_iterations=2), network)
    assert fewer["rc"] != short["rc"] and fewer["config"]["rc_iterations"] == 2
    converged = short["rc_converged"]
    assert converged["iterations"] - converged["best_iteration"] == 64 or converged["iterations"] == 4096
    assert converged["train_error"] <= short["rc"]["train_error"] + 0.02
    assert short["test_gap_converged"] == pytest.approx(short["crc"]["test_error"] - converged["test_error"])


@pytest.mark.parametrize("lr", [0.05, 2.0])
def test_rc_patience_stops_once_the_loss_has_not_improved_for_that_many_iterations(mixed, lr):
    from crc.core.models import make_model

    schema, x, y = mixed
    model = make_model("nb", schema)
    phi = model.features(x)
    full = rc(model, phi, y, lr=lr, iterations=300).losses
    stop = next((i for i in range(301) if i - int(np.argmin(full[:i + 1])) >= 10), 300)
    result = rc(model, phi, y, lr=lr, iterations=300, patience=10)
    assert result.losses == full[:stop + 1] and result.best_iteration == int(np.argmin(full[:stop + 1]))
    if lr > 1:  # large steps overshoot: the loss stops improving and RC stops early
        assert stop < 300


def test_loss_draws_are_seeded_per_node_and_round_and_have_the_asked_rate():
    assert not dropped(loss_seed(0, 0, 3), 1, 5, 0.0).any()
    assert np.array_equal(dropped(loss_seed(0, 0, 3), 7, 5, 0.3), dropped(loss_seed(0, 0, 3), 7, 5, 0.3))
    assert loss_seed(0, 0, 3) != loss_seed(0, 1, 3) != loss_seed(0, 0, 4)
    rate = np.mean([dropped(loss_seed(1, 0, v), t, 10, 0.3) for v in range(20) for t in range(1, 51)])
    assert rate == pytest.approx(0.3, abs=0.02)


def test_lossy_mixing_averages_the_node_and_the_messages_that_arrived():
    base = averaging_matrix(random_tree_graph(30, seed=2))
    seeds = [loss_seed(0, 0, v) for v in range(30)]
    matrix = lossy_mixing(base, 0.5, seeds)(3).toarray()
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, rtol=1e-15)
    dense = base.toarray()
    for v in range(30):
        neighbours = np.flatnonzero(dense[v])
        neighbours = neighbours[neighbours != v]
        kept = neighbours[~dropped(seeds[v], 3, len(neighbours), 0.5)]
        expected = np.zeros(30)
        expected[np.append(kept, v)] = 1.0 / (len(kept) + 1)
        assert np.array_equal(matrix[v], expected)
    assert np.count_nonzero(matrix) < np.count_nonzero(dense)  # some were lost
    np.testing.assert_array_equal(lossy_mixing(base, 1e-12, seeds)(3).toarray(), dense)


def test_simulated_loss_slows_crc_down_and_is_deterministic():
    network = network_factory("tree")
    config = SimulationConfig(**{**SMALL, "rounds": 10, "curve": True, "rc_converged": False})
    clean = simulate(config, network)
    lossy = simulate(config.with_settings(loss=0.5), network)
    assert lossy["crc"] != clean["crc"] and lossy == simulate(config.with_settings(loss=0.5), network)
    assert lossy["rc"] == clean["rc"]


def test_rare_classes_absent_from_training_are_a_warning_and_count_as_errors(tmp_path):
    """58,000 instances, two classes of 10 and 13: a 2,500-instance training split usually misses them."""
    rng = np.random.default_rng(0)
    y = np.array(["a"] * 28_989 + ["b"] * 28_988 + ["rare1"] * 10 + ["rare2"] * 13)
    rng.shuffle(y)
    centre = {"a": 0.0, "b": 2.0, "rare1": 4.0, "rare2": -3.0}
    x = rng.normal(size=(len(y), 2)) + np.array([centre[c] for c in y])[:, None]
    path = tmp_path / "rare.csv"
    rows = "\n".join(f"{u:.3f},{v:.3f},{c}" for (u, v), c in zip(x, y))
    path.write_text("u,v,cls\n" + rows + "\n")
    result = CliRunner().invoke(main, ["simulate", "--json", "--data", str(path), "--label", "cls", "--nodes", "50",
                                       "--local-size", "50", "--rounds", "3", "--test-size", "5000", "--no-rc-converged"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["config"]["classes"] == 4 and set(out["absent_classes"]) <= {"rare1", "rare2"} and out["absent_classes"]
    assert "had no training instance" in result.stderr
    from crc.protocol.repeat import prepare_repeat
    from crc.tables.datasets import load_dataset

    config = SimulationConfig(data=str(path), label="cls", nodes=50, local_size=50, rounds=3, test_size=5000)
    rep = prepare_repeat(load_dataset(str(path), label="cls"), config, 0)
    model = rep.split.model
    stats = rc(model, rep.split.phi_train, rep.split.y_train).stats
    absent = [model.schema.classes.index(c) for c in rep.split.absent]
    predicted = model.posteriors(model.theta(stats), rep.split.phi_test).argmax(axis=1)
    assert not np.isin(predicted, absent).any()  # never predicted: their test instances are errors
    counts = model.table(stats)[:, model.layout.columns("count")].sum(axis=1)
    assert np.all(counts[absent] <= 0)  # the statistics keep no mass for them; theta floors them


@pytest.mark.parametrize("momentum", [0.0, 0.5])
@pytest.mark.parametrize("select_best", [True, False])
def test_rc_milestone_is_what_the_shorter_run_returns(mixed, momentum, select_best):
    from crc.core.models import make_model

    schema, x, y = mixed
    model = make_model("nb", schema)
    phi = model.features(x)
    for lr, milestone in ((0.05, 7), (2.0, 40)):
        shorter = rc(model, phi, y, lr=lr, iterations=milestone, momentum=momentum, select_best=select_best)
        longer = rc(model, phi, y, lr=lr, iterations=300, patience=10, momentum=momentum, select_best=select_best,
                    milestone=milestone)
        if len(longer.losses) <= milestone:  # stopped first: nothing to read off
            assert longer.milestone is None
            continue
        assert np.array_equal(longer.milestone.stats, shorter.stats)
        assert longer.milestone.best_iteration == shorter.best_iteration
        assert longer.milestone.losses == shorter.losses
    assert rc(model, phi, y, iterations=3, milestone=4).milestone is None


def test_the_centralized_rc_runs_report_every_iteration():
    """RC at --rc-iterations is read off the run to convergence when it gets that far; otherwise it runs apart."""
    for rc_iterations, separate in ((5, False), (5000, True)):
        calls = []
        results = simulate(SimulationConfig(**SMALL, rc_iterations=rc_iterations), network_factory("tree"),
                           central_progress=lambda *call, into=calls: into.append(call))
        converged = [c for c in calls if c[0] == "RC to convergence"]
        assert [i for _, i, _ in converged] == list(range(int(results["rc_converged"]["iterations"]) + 1))
        assert {at_most for *_, at_most in converged} == {4096}
        apart = [c for c in calls if c[0] == "RC"]
        assert apart == ([("RC", i, rc_iterations) for i in range(rc_iterations + 1)] if separate else [])
        alone = simulate(SimulationConfig(**SMALL, rc_iterations=rc_iterations, rc_converged=False),
                         network_factory("tree"))
        assert alone["rc"] == results["rc"] and alone["ml"] == results["ml"]


def test_without_rc_to_convergence_the_results_leave_it_out_and_keep_the_rest():
    network = network_factory("tree")
    full = simulate(SimulationConfig(**SMALL), network)
    calls = []
    short = simulate(SimulationConfig(**SMALL, rc_converged=False), network,
                     central_progress=lambda what, iteration, at_most: calls.append(what))
    assert "rc_converged" not in short and "test_gap_converged" not in short
    assert all("rc_converged" not in r for r in short["repeats"])
    assert set(calls) == {"RC"}
    for name in ("ml", "rc", "crc", "test_gap"):
        assert short[name] == full[name]


def test_the_majority_class_baseline_is_measured_and_a_classifier_no_better_is_a_warning(tmp_path):
    """95/5 classes and features that say nothing of them: 0.05 looks like a small error, but always answering the
    common class does as well; the results give that baseline and the run warns."""
    rng = np.random.default_rng(0)
    y = np.where(rng.random(2000) < 0.05, "pos", "neg")
    x = rng.normal(size=(len(y), 3))
    path = tmp_path / "unbalanced.csv"
    path.write_text("a,b,c,cls\n" + "\n".join(f"{u:.3f},{v:.3f},{w:.3f},{c}" for (u, v, w), c in zip(x, y)) + "\n")
    result = CliRunner().invoke(main, ["simulate", "--json", "--data", str(path), "--label", "cls", "--nodes", "10",
                                       "--local-size", "50", "--rounds", "8", "--no-rc-converged"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    from crc.protocol.repeat import prepare_repeat
    from crc.tables.datasets import load_dataset

    config = SimulationConfig(data=str(path), label="cls", nodes=10, local_size=50, rounds=8)
    rep = prepare_repeat(load_dataset(str(path), label="cls"), config, 0)
    common = rep.split.model.schema.classes.index("neg")
    assert out["majority"]["test_error"] == pytest.approx(np.mean(rep.split.y_test[rep.test_idx] != common))
    assert out["majority"]["train_error"] == pytest.approx(np.mean(rep.split.y_train[rep.train_idx] != common))
    assert 0 < out["majority"]["test_error"] <= out["crc"]["test_error"]
    assert "is no lower than" in result.stderr and "most frequent class" in result.stderr


def test_the_majority_baseline_predicts_the_most_frequent_training_class_the_smallest_code_among_ties():
    from crc.core.metrics import majority_errors

    assert majority_errors(np.array([2, 2, 0]), np.array([2, 1, 2, 2])) == [0.25]
    assert majority_errors(np.array([1, 0, 0, 1]), np.array([0, 1]), np.array([1, 1])) == [0.5, 1.0]
