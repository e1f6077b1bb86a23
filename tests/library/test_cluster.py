"""crc experiment --cluster: a tiny grid on a Dask cluster of two workers that these tests start (scheduler and
workers as subprocesses on 127.0.0.1, torn down by process group) writes the same cell files as a local run,
resumes as one, shows the same progress, and survives a worker killed mid-grid."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.core.errors import CRCError
from crc.experiments import TABLES, run_experiments
from crc.topologies import network_factory

distributed = pytest.importorskip("distributed", reason="Dask distributed, the 'cluster' extra (also in the 'test' extra)")

TINY = {"rounds": 4, "nodes": 15, "local_size": 10, "rc_converged": False}  # the same in every run compared
SLOWER = {"rounds": 3000, "nodes": 15, "local_size": 10}  # about a second a cell: a worker killed holds one
GRID = {"datasets": ["twonorm"], "repeats": 2, "seed": 3}
STARTUP_S, GRID_S, STOP_S = 60, 180, 20


class LocalDask:
    """``dask scheduler`` and ``dask worker``s (each with its nanny) on 127.0.0.1, each in its own process group."""

    def __init__(self, directory: Path, workers: int = 2):
        self.directory, self.processes = directory, []
        directory.mkdir(parents=True, exist_ok=True)
        try:
            self._start_all(workers)
        except BaseException:
            self.close()
            raise

    def _start_all(self, workers: int) -> None:
        directory = self.directory
        scheduler_file = directory / "scheduler.json"
        self.scheduler = self._start("scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0",
                                     "--scheduler-file", scheduler_file)
        deadline = time.monotonic() + STARTUP_S
        while not (scheduler_file.exists() and scheduler_file.stat().st_size):
            assert self.scheduler.poll() is None and time.monotonic() < deadline, self.log("scheduler")
            time.sleep(0.1)
        self.address = json.loads(scheduler_file.read_text())["address"]
        assert self.address.startswith("tcp://127.0.0.1:")
        self.workers = [self._start(f"worker-{i}", self.address, "--host", "127.0.0.1", "--nthreads", "1",
                                    "--dashboard-address", "127.0.0.1:0", "--death-timeout", str(STARTUP_S))
                        for i in range(workers)]
        with self.client() as client:
            client.wait_for_workers(workers, timeout=STARTUP_S)

    def _start(self, name: str, *args) -> subprocess.Popen:
        command = "scheduler" if name == "scheduler" else "worker"
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process below
        process = subprocess.Popen([sys.executable, "-m", "dask", command, *map(str, args)], stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        process.log_file = log
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        return (self.directory / f"{name}.log").read_text(errors="replace")[-3000:]

    def client(self):
        return distributed.Client(self.address, timeout=STARTUP_S, set_as_default=False)

    def kill(self, process: subprocess.Popen) -> None:
        """SIGKILL a worker and its nanny at once (a machine that died), and wait for them."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_S)

    def close(self) -> None:
        for process in reversed(self.processes):  # workers first, then the scheduler
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=STOP_S)
            process.log_file.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    dask = LocalDask(tmp_path_factory.mktemp("dask"))
    try:
        yield dask
    finally:
        dask.close()


def run(names, out, *, defaults=TINY, jobs=2, cluster=None, on_cell=None, **grid):
    """run_experiments in a thread of its own with a time limit (a hung cluster fails the test, never hangs it)."""
    calls = {"pending": None, "finished": []}

    def on_start(pending, cells):
        calls["pending"] = [(c.table, c.data, c.column) for c in pending]

    def finished(cell, seconds):
        calls["finished"].append(cell.column)
        if on_cell is not None:
            on_cell(cell)

    outcome = {}

    def target():
        try:
            outcome["tables"] = run_experiments(names, out=out, network_factory=network_factory, jobs=jobs, cluster=cluster,
                                                defaults=defaults, on_start=on_start, on_cell=finished, **{**GRID, **grid})
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(GRID_S)
    assert not thread.is_alive(), f"the grid did not finish in {GRID_S} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["tables"], calls


def without_seconds(value):
    """A cell or table file less its timing fields ('seconds', the only ones)."""
    if isinstance(value, dict):
        return {key: without_seconds(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, list):
        return [without_seconds(item) for item in value]
    return value


def files(out: Path) -> dict[str, dict]:
    """Every cell and table JSON file under ``out`` (the .cache of centralized results left out)."""
    return {str(path.relative_to(out)): json.loads(path.read_text()) for path in sorted(out.rglob("*.json"))
            if ".cache" not in path.parts}


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The local runs (--jobs 2: one BLAS thread per worker process, as on the cluster's workers)."""
    out = tmp_path_factory.mktemp("local")
    run(["table12"], out / "tiny")
    run(["table6"], out / "slower", defaults=SLOWER)
    return out


def test_a_grid_on_the_cluster_writes_the_local_runs_files_and_resumes_as_one(cluster, local, tmp_path):
    _, calls = run(["table12"], tmp_path, cluster=cluster.address)
    assert sorted(calls["finished"]) == sorted(c.key for c in TABLES["table12"].columns)  # progress: one call a cell
    expected, got = files(local / "tiny"), files(tmp_path)
    assert set(got) == set(expected) and len(got) == len(TABLES["table12"].columns) + 1
    assert {name: without_seconds(v) for name, v in got.items()} == {name: without_seconds(v) for name, v in expected.items()}
    _, again = run(["table12"], tmp_path, cluster=cluster.address)
    assert again["pending"] == [] and again["finished"] == []
    (tmp_path / "cells" / "table12" / "twonorm" / "period2.json").write_text("{ not json")
    _, repaired = run(["table12"], tmp_path, cluster=cluster.address)
    assert repaired["pending"] == [("table12", "twonorm", "period2")] == [("table12", "twonorm", c) for c in repaired["finished"]]
    assert without_seconds(files(tmp_path)) == without_seconds(expected)


def test_a_csv_data_set_goes_to_the_workers_with_its_cells_and_a_failing_cell_fails_the_run(cluster, tmp_path, monkeypatch):
    """The CSV file's path is relative to this process's directory, where no worker looks: the client sends the data."""
    rng = np.random.default_rng(0)
    rows = [f"{rng.normal() + v:.5f},{rng.normal() - v:.5f},{'yes' if v else 'no'}" for v in rng.integers(2, size=2400)]
    (tmp_path / "mine.csv").write_text("\n".join(["f1,f2,cls", *rows]) + "\n")
    monkeypatch.chdir(tmp_path)
    run(["table12"], Path("local"), datasets=["mine.csv"], label="cls")
    _, calls = run(["table12"], Path("cluster"), datasets=["mine.csv"], label="cls", cluster=cluster.address)
    assert len(calls["finished"]) == len(TABLES["table12"].columns)
    assert (tmp_path / "cluster" / "cells" / "table12" / "mine").is_dir()
    assert without_seconds(files(tmp_path / "cluster")) == without_seconds(files(tmp_path / "local"))
    with pytest.raises(CRCError, match=r"table4 twonorm tree\+\d+: a tree on 6 nodes leaves 10 possible extra edges"):
        run(["table4"], Path("impossible"), defaults={"rounds": 2, "nodes": 6, "local_size": 10}, cluster=cluster.address)


def test_a_worker_killed_mid_grid_loses_no_cell(local, tmp_path):
    """The first finished cell kills a worker that holds a cell (and its nanny, so it does not come back): the
    scheduler gives that cell to the other worker, and every file is the local run's."""
    dask = LocalDask(tmp_path / "dask")
    try:
        with dask.client() as client:
            pids = client.run(os.getpid)
            killed = {}

            def kill_a_busy_worker(cell):
                if killed:
                    return
                busy = {worker: keys for worker, keys in client.processing().items() if keys}
                assert busy, "no worker holds a cell after the first one finished"
                worker, keys = next(iter(busy.items()))
                group = os.getpgid(pids[worker])
                victim = next(p for p in dask.workers if p.pid == group)
                dask.kill(victim)
                killed.update(worker=worker, keys=list(keys))

            _, calls = run(["table6"], tmp_path / "out", defaults=SLOWER, cluster=dask.address, on_cell=kill_a_busy_worker)
            assert len(client.nthreads()) == 1  # the killed worker did not come back
        columns = [c.key for c in TABLES["table6"].columns]
        # the keys are crc-<table>-<data>-<column>-<run>
        lost = {c for c in columns for key in killed["keys"] if key.startswith(f"crc-table6-twonorm-{c}-")}
        assert lost and lost <= set(calls["finished"][1:])  # finished after the kill, on the worker left
        assert sorted(calls["finished"]) == sorted(columns)
        assert without_seconds(files(tmp_path / "out")) == without_seconds(files(local / "slower"))
    finally:
        dask.close()


def test_the_command_line_runs_on_the_cluster_with_the_local_progress(cluster, tmp_path):
    args = ["experiment", "table12", "--datasets", "twonorm", "--repeats", "1", "--no-rc-converged"]  # in both runs compared
    assert CliRunner().invoke(main, [*args, "--out", str(tmp_path / "local"), "--jobs", "2"]).exit_code == 0
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "cluster"), "--cluster", cluster.address])
    assert result.exit_code == 0, result.output
    assert f"5 cells: 5 to run, 0 already done, 0 n/a (on the Dask cluster at {cluster.address})" in result.stderr
    assert "[5/5] table12 twonorm" in result.stderr and f"{tmp_path}/cluster/table12.md" in result.stdout
    assert without_seconds(files(tmp_path / "cluster")) == without_seconds(files(tmp_path / "local"))
    args.extend(["--out", str(tmp_path / "cluster")])
    again = CliRunner().invoke(main, [*args, "--cluster", cluster.address])
    assert again.exit_code == 0 and "0 to run, 5 already done" in again.stderr
    both = CliRunner().invoke(main, [*args, "--cluster", cluster.address, "--jobs", "2"])
    assert both.exit_code == 2 and "--jobs and --cluster do not go together" in both.output


def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr("crc.experiments.cluster.CONNECT_SECONDS", 0.5)  # nothing listens: refused, however long
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    result = CliRunner().invoke(main, ["experiment", "table12", "--datasets", "twonorm", "--repeats", "1",
                                       "--out", str(tmp_path), "--cluster", address])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: --cluster: cannot reach a Dask scheduler at {address}"), result.output


def test_without_the_extra_cluster_is_refused_by_name_and_nothing_else_needs_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    result = CliRunner().invoke(main, ["experiment", "table12", "--datasets", "twonorm", "--out", str(tmp_path),
                                       "--cluster", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 1
    assert "Error: --cluster needs Dask distributed, the 'cluster' extra: pip install 'crc-p2p[cluster]'" in result.output
    assert not (tmp_path / "cells").exists()
    code = ("import sys, crc.cli.main, crc.experiments, crc.experiments.runner, crc.experiments.cluster; "
            "from click.testing import CliRunner; "
            "r = CliRunner().invoke(crc.cli.main.main, ['simulate', '--rounds', '2', '--nodes', '3', '--local-size', '10']); "
            "assert r.exit_code == 0, r.output; print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "[]"
    import importlib.metadata

    from packaging.requirements import Requirement

    required = [Requirement(text) for text in importlib.metadata.requires("crc-p2p")]
    assert not [r for r in required if r.name in ("distributed", "dask") and r.marker is None]  # a plain install has none
    extras = {str(r.marker).split('"')[1] for r in required if r.name == "distributed"}
    assert extras == {"cluster", "test"}


def test_workers_with_another_crc_version_are_refused_before_any_cell(cluster, tmp_path, monkeypatch):
    monkeypatch.setattr("importlib.metadata.version", lambda name: "0.0.0")  # this process only: the workers keep theirs
    with pytest.raises(CRCError, match=r"--cluster: this client has crc-p2p 0\.0\.0, but tcp://127\.0\.0\.1:\d+ has crc-p2p "):
        run(["table12"], tmp_path, cluster=cluster.address)
    assert not (tmp_path / "cells").exists()
