"""What the commands say besides their results: help texts, verbosity, warnings, progress, the shared summary, files."""

import json
import os
import subprocess
import sys
import types

import click
import pytest
from click.testing import CliRunner

from crc.cli import entry, output, summary
from crc.cli.main import COMMANDS, main
from crc.cli.output import Progress
from crc.cli.summary import summary_lines
from crc.protocol import SimulationConfig
from crc.report.format import DEGENERATE_LOGLIK

SMALL = ["--data", "twonorm", "--nodes", "5", "--local-size", "20", "--rounds", "4"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def commands():
    ctx = click.Context(main)
    return {name: main.get_command(ctx, name) for name in COMMANDS}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_of_every_command_has_a_help_text(name):
    undocumented = [param.opts for param in commands()[name].params
                    if isinstance(param, click.Option) and not param.hidden and not param.help]
    assert undocumented == []


def test_the_command_list_is_not_truncated():
    listing = run("--help").stdout.split("Commands:")[1]
    assert "..." not in listing
    assert all(name in listing for name in COMMANDS)
    for option in ("-v, --verbose", "-q, --quiet"):
        assert option in run("--help").stdout


def test_quiet_hides_warnings_and_verbose_adds_timings():
    quiet = run("-q", "simulate", *SMALL, "--no-rc-converged", "--test-size", "5")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    loud = run("simulate", *SMALL, "--no-rc-converged", "--test-size", "5")
    assert loud.stderr.count("Warning: the test set has only 5 instances (< 30)") == 1
    verbose = run("-v", "simulate", *SMALL, "--no-rc-converged")
    assert "s of it in the rounds" in verbose.stderr


@pytest.mark.parametrize("command", [["simulate", *SMALL, "--no-rc-converged"],
                                     ["split", "--data", "twonorm", "--nodes", "2", "--local-size", "5"]])
def test_a_tiny_test_set_is_warned_about_once(tmp_path, command):
    if command[0] == "split":
        command = [*command, "--out", tmp_path]
    result = run(*command, "--test-size", "1")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning")]
    assert warnings == ["Warning: the test set has only 1 instance (< 30): errors move in steps of 1/1 = 1; use "
                        "--test-size 0.25 (a fraction) or a count of a few hundred"]
    json_too = run(*command, "--test-size", "0.003", *(["--json"] if command[0] == "simulate" else []))
    assert "Warning: the test set has only 22 instances" in json_too.stderr  # a fraction: 0.003 of twonorm's 7400


@pytest.mark.parametrize("command", [["simulate", "--no-rc-converged"], ["split"]])
def test_a_test_set_the_training_set_left_tiny_is_warned_about_with_the_remedy_that_helps(tmp_path, command):
    """wine's 178 instances, 170 of them for training: a larger --test-size cannot help, which the warning said."""
    path = tmp_path / "small.csv"
    path.write_text("a,b,y\n" + "".join(f"{i % 7},{i * 0.37:.2f},{'pq'[i % 2]}\n" for i in range(60)))
    extra = ["--out", tmp_path / "out"] if command[0] == "split" else ["--rounds", "2"]
    result = run(*command, "--data", path, "--label", "y", "--nodes", "5", "--train-size", "50", *extra)
    assert result.exit_code == 0, result.output
    assert ("Warning: the test set has only 10 instances (< 30): errors move in steps of 1/10 = 0.1; fewer training "
            "instances (--nodes, --local-size, --train-size) leave more for it") in result.stderr
    assert "use --test-size" not in result.stderr


def test_a_degenerate_log_likelihood_is_marked_and_explained_but_kept_in_the_json():
    args = ["--data", "optdigits", "--nodes", "10", "--local-size", "30", "--rounds", "4", "--no-rc-converged"]
    result = run("simulate", *args)
    assert result.exit_code == 0, result.output
    ml = next(line for line in result.stdout.splitlines() if line.startswith("ML "))
    assert ml.endswith("†")
    assert "† log-likelihood below -1000 per instance: some class-conditional variance sits at its floor" in result.stdout
    figures = json.loads(run("simulate", *args, "--json").stdout)
    assert figures["ml"]["test_loglik"] < DEGENERATE_LOGLIK  # as computed
    plain = run("simulate", *SMALL)
    assert "†" not in plain.stdout
    assert "--dp-epsilon" not in result.stdout


def test_a_private_runs_degenerate_log_likelihood_names_the_noise_as_its_usual_cause():
    result = run("simulate", *SMALL, "--no-rc-converged", "--dp-epsilon", "1")
    assert result.exit_code == 0, result.output
    crc_row = next(line for line in result.stdout.splitlines() if line.startswith("CRC "))
    assert crc_row.endswith("†")
    assert "Under --dp-epsilon the usual cause is the noise" in " ".join(result.stdout.split())


def fake_results(**network):
    row = {"train_error": 0.1, "test_error": 0.2, "test_loglik": -20.0}
    results = {"config": {**SimulationConfig(data="twonorm", nodes=5, rounds=4).to_json(), "ess": 400.0},
               "ml": row, "rc": row, "crc": {**row, "train_std": 0.01, "test_std": 0.02}, "train_gap": 0.0, "test_gap": 0.0,
               "local_sizes": {"min": 20, "max": 20},
               "evaluation": {"nodes": 5, "train_instances": 100, "test_instances": 500, "sampled": False}}
    if network:
        results["network"] = network
    return results


NETWORK = {"finished": 5, "wall_s": 1.5, "messages": 40, "bytes": 4000, "bytes_per_message": 100.0, "payload_bytes": 80,
           "rejected": 0, "missing": 1, "round_ms_p50": 2.0, "round_ms_p99": 9.0}


def test_launch_and_simulate_share_one_summary_the_launch_adds_its_network():
    simulated, launched = summary_lines(fake_results()), summary_lines(fake_results(**NETWORK))
    assert simulated[0].startswith("twonorm: nb on a tree of 5 peers,") and simulated[0].endswith("1 repeat(s)")
    assert launched[0].startswith("twonorm: nb on a tree of 5 real peers on 127.0.0.1,")
    assert simulated[1] == launched[1] == ("algorithm accelerated: exact diffusion, categorical start, averaged category "
                                           "counts, 3 local steps per round")
    assert launched[2] == "5 of 5 peers finished in 1.5 s"
    assert launched[3:-1] == simulated[2:]  # the same table, std and gap lines
    assert launched[-1].startswith("network: 40 messages, 4000 bytes (100 per message on average; statistics payload 80), "
                                   "rejected 0, missing 1")
    masked = summary_lines({**fake_results(**NETWORK), "secure_aggregation": {
        "protected_fraction": 1.0, "messages_per_round": 20, "plain_messages_per_round": 8}})
    assert masked[-1].startswith("network: 40 messages, 4000 bytes (100 per message on average, secure aggregation's "
                                 "messages included; statistics payload 80)")  # 1291 a message against 3920 read as a bug


def test_hybrid_groups_name_each_peers_group_in_the_bytes_a_round():
    """hybrid:2x2 printed 'block 0 (label holder) 4509; block 1 (member) 4502; block 0 (label holder) 4493; ...'."""
    def network(groups):
        peers = [{"group": g, "block": b, "role": "member" if b else "label holder", "rows_dropped": 0,
                  "bytes_per_round": 100.0 * g + b} for g in range(groups) for b in range(2)]
        return {**NETWORK, "instances": 400, "setup_ms": 5.0, "peers": peers}

    hybrid = " ".join(summary._group_network_lines(network(2)))
    assert ("bytes sent a round: group 0 block 0 (label holder) 0; group 0 block 1 (member) 1; "
            "group 1 block 0 (label holder) 100; group 1 block 1 (member) 101") in hybrid
    assert "bytes sent a round: block 0 (label holder) 0; block 1 (member) 1" in " ".join(
        summary._group_network_lines(network(1)))


def test_the_absent_classes_warning_names_ten_and_counts_the_rest(capsys):
    summary.warn_absent_classes({"absent_classes": [f"c{k}" for k in range(12)]})
    assert capsys.readouterr().err.startswith("Warning: class(es) 'c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', "
                                              "'c9' and 2 more had no training instance")


@pytest.mark.parametrize("topology, said", [("tree", "on a tree of 5 peers"), ("tree+3", "on a tree+3 of 5 peers"),
                                             ("complete", "on a complete graph of 5 peers"),
                                             ("regular:3", "on a regular:3 graph of 5 peers"),
                                             ("er:0.2", "on an er:0.2 graph of 5 peers")])
def test_the_summary_names_the_graph_in_words(topology, said):
    """'nb on a complete of 10 peers' read as a word missing."""
    results = fake_results()
    results["config"]["topology"] = topology
    assert f"twonorm: nb {said}, " in summary_lines(results)[0]


def test_one_peer_is_said_to_be_alone():
    results = fake_results()
    results["config"]["nodes"] = 1
    assert summary_lines(results)[0].startswith("twonorm: nb on a tree of 1 peer (alone: no neighbour to average with), ")
    launched = summary_lines({**results, "network": NETWORK})
    assert launched[0].startswith("twonorm: nb on a tree of 1 real peer on 127.0.0.1 (alone: no neighbour to average with), ")


def test_the_summary_names_the_circuits_structure_whose_runs_differ():
    def head(**options):
        results = fake_results()
        results["config"] = {**SimulationConfig(data="twonorm", nodes=5, rounds=4, **options).to_json(), "ess": 400.0}
        return summary_lines(results)[0]

    assert head(model="pc").startswith("twonorm: pc (mixture) on a tree of 5 peers,")
    assert head(model="pc", model_options={"structure": "region-graph"}).startswith("twonorm: pc (region-graph) on a tree")
    assert head(model="qda").startswith("twonorm: qda on a tree")


def test_the_summary_gives_every_log_likelihood_five_significant_digits_trailing_zeros_kept():
    results = fake_results()
    results["rc"] = {**results["rc"], "test_loglik": -27.49}
    rows = {line[:18].strip(): line[42:].strip() for line in summary_lines(results)[3:6]}
    assert rows == {"ML": "-20.000", "RC": "-27.490", "CRC": "-20.000"}  # not '-20' and '-27.49' beside '-28.009'


def test_the_summary_says_privacy_and_secure_aggregation_are_on_and_when_rc_hit_its_cap():
    results = fake_results()
    results["privacy"] = {"epsilon": 4.0, "delta": 1e-5, "clip": 1.0, "rounds": 4, "sensitivity": 22.0,
                          "noise_multiplier": 3.3, "sigma": 72.33, "epsilon_spent": 3.9997}
    results["secure_aggregation"] = {"protected_fraction": 0.75, "single_neighbour_peers": 2, "messages_per_round": 40,
                                     "plain_messages_per_round": 8}
    results["rc_converged"] = {"train_error": 0.0, "test_error": 0.2, "test_loglik": -20.0, "iterations": 4096,
                               "best_iteration": 4096}
    results["test_gap_converged"] = 0.01
    lines = summary_lines(results)
    assert "differential privacy: epsilon 4 (spent 4), delta 1e-05, clip 1, noise sigma 72.33 per release" in lines
    assert "secure aggregation: 75% of messages protected (40 messages a round against 8 in plain)" in lines
    assert "(4096 iterations, best at 4096, the cap: RC was still improving): test +0.0100" in lines[-1]
    results["rc_converged"]["best_iteration"] = 1200
    assert "(4096 iterations, best at 1200): test" in summary_lines(results)[-1]
    results["config"] = {**results["config"], "repeats": 3}
    assert "(4096 iterations, best at 1200; means over 3 repeats): test" in summary_lines(results)[-1]
    launched = summary_lines({**results, "network": NETWORK})  # a launch runs the first repeat only
    assert "(4096 iterations, best at 1200): test" in next(line for line in launched if line.startswith("gap CRC - RC run"))
    assert not any(line.startswith(("differential privacy", "secure aggregation")) for line in summary_lines(fake_results()))
    results["privacy"] = {**results["privacy"], "rounds": 2, "release_every": 2}
    results["config"] = {**results["config"], "release_every": 2}
    lines = summary_lines(results)
    assert "noise sigma 72.33 per release, 2 releases (one every 2 rounds)" in next(
        line for line in lines if line.startswith("differential privacy"))
    results["privacy"] = {**results["privacy"], "noise": "distributed", "colluders": 1, "dropouts": 0,
                          "sums_per_round": 3}
    assert next(line for line in summary_lines(results) if line.startswith("differential privacy")).endswith(
        "; distributed: shares that add up in every neighbourhood sum (3 sum(s) a round a peer; --colluders 1, "
        "--dp-dropouts 0)")
    assert next(line for line in lines if line.startswith("algorithm")).endswith(
        "; local step and release every 2 rounds, averaging only between")


def test_out_writes_the_json_and_datasets_has_json(tmp_path):
    result = run("simulate", *SMALL, "--out", tmp_path / "run.json")
    assert result.exit_code == 0 and "gap CRC - RC" in result.stdout
    assert json.loads((tmp_path / "run.json").read_text())["config"]["nodes"] == 5
    listed = run("datasets", "--json", "--out", tmp_path / "sets.json")
    assert json.loads(listed.stdout) == json.loads((tmp_path / "sets.json").read_text())
    assert {"name": "letter", "instances": 20000, "features": 16, "continuous": 16, "discrete": 0, "classes": 26} \
        in json.loads(listed.stdout)


def test_simulate_plots_turn_the_curve_on(tmp_path):
    result = run("simulate", *SMALL, "--plots", tmp_path / "figs", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["rounds"]) == 4
    assert (tmp_path / "figs" / "convergence.png").read_bytes().startswith(PNG_SIGNATURE)
    assert (tmp_path / "figs" / "convergence.pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("command", [["simulate", *SMALL], ["launch", "--nodes", "2", "--rounds", "2"],
                                     ["report", "run.json"]])
def test_plots_without_matplotlib_fail_before_any_work(tmp_path, monkeypatch, command):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails, as when it is not installed
    (tmp_path / "run.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    result = run(*command, "--plots", tmp_path / "figs")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Invalid value for '--plots': plots need matplotlib: pip install 'crc-p2p[plot]'" in result.output
    assert "not a crc results file" not in result.output and "simulating" not in result.output  # nothing ran
    assert not (tmp_path / "figs").exists()


def test_report_csv_rounds_to_six_significant_digits(tmp_path):
    (tmp_path / "run.json").write_text(run("simulate", *SMALL, "--json").stdout)
    lines = run("report", tmp_path / "run.json", "--format", "csv").stdout.splitlines()
    figures = lines[1].split(",")[7:]
    assert all(len(figure.lstrip("-").replace(".", "").lstrip("0")) <= 6 for figure in figures), figures


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_without_a_terminal_prints_a_line_every_ten_percent_or_five_seconds():
    clock, lines = Clock(), []

    @click.command()
    def work():
        bar = Progress(100, "working", "steps", terminal=False, enabled=True, clock=clock)
        for step in range(1, 101):
            clock.now += 0.5 if step <= 20 else 0.01  # slow start: 5 s lines; then 10 % steps but at most one a second
            bar.update(step)

    result = CliRunner().invoke(work, [])
    lines = result.stderr.splitlines()
    assert lines[0] == "working: 10% (10/100 steps, 5.0 s elapsed, about 45 s left)"
    assert lines[1].startswith("working: 20% (20/100 steps, 10 s elapsed")
    assert lines[-1] == "working: 100% (100/100 steps, 11 s elapsed)"
    assert len(lines) == 3


def test_progress_prints_its_last_line_once_however_often_it_is_told_it_is_done():
    """``crc launch`` polls the peers' rounds while it waits for their results: 100 % was printed at every poll."""
    clock = Clock()

    @click.command()
    def work():
        bar = Progress(16, "launching", "peer-rounds", terminal=False, enabled=True, clock=clock)
        for _ in range(12):
            clock.now += 6.0  # slow enough for a line at every update if nothing stopped it
            bar.update(16)

    lines = CliRunner().invoke(work, []).stderr.splitlines()
    assert lines == ["launching: 100% (16/16 peer-rounds, 6.0 s elapsed)"]


def test_progress_that_printed_0_percent_prints_100_percent_when_done_however_soon():
    """crc launch on a large file: 5 s of set-up printed 'launching: 0% ...', the peers finished half a second later,
    and the log ended at 0 %."""
    clock = Clock()

    @click.command()
    def work():
        bar = Progress(32, "launching", "peer-rounds", phases=1, terminal=False, enabled=True, clock=clock)
        bar.phase("preparing the peers' files and starting the peers")
        clock.now = 5.3
        bar.update(0)
        clock.now = 5.8
        bar.update(32)

    lines = CliRunner().invoke(work, []).stderr.splitlines()
    assert lines == ["launching: 0% (0/32 peer-rounds, 5.3 s elapsed, 5.3 s of it set-up)",
                     "launching: 100% (32/32 peer-rounds, 5.8 s elapsed, 5.3 s of it set-up)"]


def test_a_long_phase_reports_how_far_it_has_got_at_most_every_five_seconds():
    clock = Clock()

    @click.command()
    def work():
        bar = Progress(10, "simulating", "rounds", phases=1, terminal=False, enabled=True, clock=clock)
        bar.phase("repeat 1/1: centralized ML and RC")
        for iteration in range(80):
            clock.now += 0.25  # 20 s of RC iterations
            bar.detail(f"RC to convergence, iteration {iteration} (at most 4096)")
        for done in range(1, 11):
            bar.update(done)

    lines = CliRunner().invoke(work, []).stderr.splitlines()
    details = [line for line in lines if "iteration" in line]
    assert details[0] == "simulating: repeat 1/1: centralized ML and RC: RC to convergence, iteration 19 (at most 4096)"
    assert len(details) == 4  # at 5, 10, 15 and 20 s
    quiet = Progress(10, "simulating", "rounds", terminal=False, enabled=False, clock=clock)
    quiet.detail("nothing shown")  # crc -q: no output (CliRunner would not see it anyway; it must not raise)


def test_progress_leaves_set_up_phases_out_of_the_rate():
    clock = Clock()
    bar = Progress(20, "simulating", "rounds", phases=2, terminal=False, enabled=False, clock=clock)
    bar.phase("repeat 1/2: set-up")
    clock.now = 20.0  # a slow set-up
    bar.update(1)
    for done in range(2, 11):
        clock.now += 0.1
        bar.update(done)
    assert bar.eta() == pytest.approx(10 * 0.1 + 20.0)  # ten rounds at 0.1 s, and one more set-up like the first
    bar.phase("repeat 2/2: set-up")
    clock.now += 20.0
    bar.update(11)
    assert bar.eta() == pytest.approx(9 * 0.1)


def test_verbosity_sets_a_peers_default_log_level(monkeypatch):
    monkeypatch.setattr(output, "verbosity", lambda: 1)
    assert output.log_level("info") == "debug" and output.log_level("warning") == "info"
    monkeypatch.setattr(output, "verbosity", lambda: -5)
    assert output.log_level("info") == "error"


def test_ctrl_c_in_any_command_is_one_line_and_exit_status_130(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("crc.cli.simulate.run_simulation", interrupted)
    result = run("simulate", *SMALL)
    assert result.exit_code == 130 and result.stderr.strip().endswith("Interrupted.") and "Traceback" not in result.output


def test_ctrl_c_while_the_command_line_is_still_importing_is_one_line_and_exit_status_130(monkeypatch, capsys):
    """Ctrl-C in the first half second of ``crc``, while it imports numpy, scipy and click, printed a traceback."""
    class Importing(types.ModuleType):
        def __getattr__(self, name):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "crc.cli.main", Importing("crc.cli.main"))
    with pytest.raises(SystemExit) as ended:
        entry.main()
    assert ended.value.code == 130 and capsys.readouterr().err == "Interrupted.\n"


HEAVY_IMPORTS = ("numpy", "scipy", "click", "pathlib", "typing", "tempfile", "shutil", "random", "lzma")
"""Modules whose import takes a noticeable time: before this session the ``crc`` script imported them all (through
``crc``: numpy and scipy, half a second; pathlib, typing and importlib.abc, which pulls in tempfile, random, shutil
and lzma, a tenth of a second on a busy machine) before it could handle Ctrl-C, which then printed a traceback."""


def test_the_entry_point_imports_no_heavy_module_before_its_ctrl_c_guard(tmp_path):
    """What the installed ``crc`` script runs before its guard (``import crc.cli.entry``, hence ``crc``) imports none
    of ``HEAVY_IMPORTS``: what remains is Python's own start-up. Run from a folder of no checkout, as the script is
    (from a checkout's root ``crc`` also adds the finder of its mapped folders, ``crc.source_tree``)."""
    code = ("import sys; before = set(sys.modules); import crc.cli.entry; "
            f"print(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {HEAVY_IMPORTS!r}))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                            cwd=tmp_path)
    assert loaded.stdout.strip() == "[]"


def test_a_second_ctrl_c_while_the_first_is_reported_still_exits_130(monkeypatch):
    """`timeout -s INT` signals the command, then its process group: once in ~15 runs the second arrived as
    'Interrupted.' was written, and click ended the command with 'Aborted!' and status 1."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    def echo_interrupted_again(*args, **kwargs):
        monkeypatch.undo()
        raise KeyboardInterrupt

    monkeypatch.setattr("crc.cli.simulate.run_simulation", interrupted)
    monkeypatch.setattr("crc.cli.main.click.echo", echo_interrupted_again)
    result = run("simulate", *SMALL)
    assert result.exit_code == 130 and "Aborted!" not in result.output


def test_progress_says_how_much_of_the_elapsed_time_was_set_up():
    """A 3 s line at 11 % with "about 0.1 s left" read as a bug when the set-up's share was not shown."""
    clock, lines = Clock(), []

    @click.command()
    def work():
        bar = Progress(64, "simulating", "rounds", phases=1, terminal=False, enabled=True, clock=clock)
        bar.phase("repeat 1/1: centralized ML and RC")
        clock.now = 2.9
        for done in range(1, 8):
            clock.now += 0.01
            bar.update(done)

    lines = CliRunner().invoke(work, []).stderr.splitlines()
    assert lines[-1] == "simulating: 11% (7/64 rounds, 3.0 s elapsed, 2.9 s of it set-up, about 0.6 s left)"


def test_a_reader_that_left_early_ends_the_command_quietly_with_141():
    """`crc simulate | head -1`: the rest of the summary has nowhere to go; no error line, 128 + SIGPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "crc", "-q", "simulate", *SMALL, "--no-rc-converged"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


def test_the_majority_class_row_and_its_warning_only_when_crc_does_no_better(capsys):
    results = {**fake_results(), "majority": {"train_error": 0.3, "test_error": 0.35}}
    assert "majority class          0.3000      0.3500              –" in summary_lines(results)
    summary.warn_no_better_than_majority(results)  # CRC's 0.2 beats it
    assert capsys.readouterr().err == ""
    summary.warn_no_better_than_majority({**results, "majority": {"train_error": 0.0, "test_error": 0.0}})
    assert capsys.readouterr().err == ""  # a test set of one class: nothing to beat
    summary.warn_no_better_than_majority({**results, "majority": {"train_error": 0.1, "test_error": 0.2}})
    assert capsys.readouterr().err.startswith("Warning: CRC's test error 0.2000 is no lower than 0.2000, that of always "
                                              "predicting the training set's most frequent class")
    attacked = {**results, "crc": {**results["crc"], "test_error": 0.6}, "honest": {"test_error": 0.2}}
    summary.warn_no_better_than_majority(attacked)  # the Byzantine peers' errors are the attack's, not the data's
    assert capsys.readouterr().err == ""
    summary.warn_no_better_than_majority({**attacked, "honest": {"test_error": 0.4}})
    assert capsys.readouterr().err.startswith("Warning: the honest peers' test error 0.4000 is no lower than 0.3500")
    assert not [line for line in summary_lines(fake_results()) if line.startswith("majority")]  # results written before it
