"""Every code block of the README and of the documentation (docs/**/*.md) runs as written.

Each test names its block by page and line (``docs/how-to/keys.md:9``). All pages share one temporary directory,
as one reader following them would: a block that appears on several pages (the "Real peers" one: the README, the
tutorial and the deployment guide) runs once there.

* ```python blocks run in a temporary directory, each in a fresh interpreter with a time limit. The model-file
  block reads the files the "Real peers" shell block writes, so that block runs first in the same directory.
* ```sh blocks: every `crc ...` command line in them must parse (the click group resolves the subcommand and
  parses its options, type conversions and checks included, without running it). Then the blocks run under
  bash in the temporary directory (with the interpreter's own `crc` first on PATH), except the lines
  ``NOT_RUN`` lists with the reason: installing, the test suite itself, the paper's experiments, which
  take minutes to hours, `crc status`, which needs running peers, and a Dask cluster's processes, which run
  until stopped. A block with such a line runs its other
  lines one at a time. A block of `crc node` peers (the "Real peers" one, the vertical group's) runs whole
  (its peers talk to each other), on free ports instead of its own so that it cannot collide with anything
  else on the machine; `crc report results/...` reads copies of the committed tables.
  A command line with ``--config FILE`` is parsed where its block of peers (else the "Real peers" block) wrote the
  file.
* ```text blocks that quote a summary (``QUOTED``: the README's gap line, the tutorial's summary) are what their
  command prints today, so that a change of the algorithm or its defaults cannot leave stale figures behind.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from crc.cli.main import main
from support.cli import run

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RESULTS = ROOT / "results"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
NOT_RUN = {
    "pip install": "installs the package into a new virtual environment; the tests run in an installed one",
    "pytest": "the test suite itself",
    "crc experiment": "the paper's experiments: minutes to hours",
    "zsh_source": "a zsh script (bash runs this block); checked below that click generates it",
    "crc status": "reads running peers' metrics: tests/cli/test_status.py runs it against three live peers",
    "dask ": "starts a Dask scheduler or worker, which runs until stopped: tests/library/test_cluster.py starts a "
             "cluster of its own",
}
SHELL_S, PYTHON_S = 600, 180

pytestmark = pytest.mark.skipif(not README.exists(), reason="needs the checkout's README.md and docs/")


def pages() -> list[Path]:
    """The README, then every page of the documentation."""
    return [README, *sorted(DOCS.rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: str  # relative to the checkout
    line: int  # of the opening fence
    language: str
    body: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(page.relative_to(ROOT).as_posix(), text.count("\n", 0, match.start()) + 1, match[1], match[2])
            for match in BLOCK.finditer(text)]


def blocks(language: str, within: list[Path] | None = None) -> list[Block]:
    """The blocks of one language, of every page (or of those given), in page order."""
    return [block for page in within or pages() for block in page_blocks(page) if block.language == language]


def logical_lines(body: str) -> list[str]:
    """The block's commands, backslash continuations joined."""
    return [line for line in body.replace("\\\n", " ").splitlines() if line.strip()]


def crc_commands(line: str) -> list[list[str]]:
    """The argument lists of the `crc` commands of a shell line (comments, redirections and other commands left out)."""
    tokens = shlex.split(line, comments=True)
    commands, current = [], []
    for token in tokens + [";"]:
        if token in ("&&", "||", "|", ";", "&"):
            if current and current[0] == "crc":
                commands.append(current[1:])
            current = []
        elif current and current[-1] == ">":
            current.pop()  # the redirection's target
        else:
            current.append(token)
    return commands


def all_crc_commands(within: list[Path] | None = None) -> list[tuple[Block, list[str]]]:
    return [(block, command) for block in blocks("sh", within) for line in logical_lines(block.body)
            for command in crc_commands(line)]


@pytest.mark.parametrize("block, args", all_crc_commands(),
                         ids=lambda value: str(value) if isinstance(value, Block) else " ".join(["crc", *value])[:60])
def test_every_crc_command_line_parses(block, args, request, monkeypatch):
    if "--config" in args:  # the file is read as the line is parsed: parse it where its block wrote it
        workspace = request.getfixturevalue("workspace")
        run_peers_block(workspace, block.body if "crc node" in block.body else real_peers_block())
        monkeypatch.chdir(workspace)
    ctx = main.make_context("crc", list(args))
    rest = [*(getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", [])), *ctx.args]
    name, command, rest = main.resolve_command(ctx, rest)
    command.make_context(name, rest, parent=ctx)  # a click error (unknown option, bad value, missing option) fails here


def test_the_pages_have_the_blocks_these_tests_expect():
    assert len(all_crc_commands()) >= 8
    assert any("crc node" in block.body for block in blocks("sh")) and any("load_model" in block.body for block in blocks("python"))
    assert len(pages()) > 10, "the documentation's pages are not there"


def test_the_readme_starts_with_the_two_first_commands_and_stays_short():
    """A newcomer's first commands: install and run the main job with no arguments; install and pass the tests."""
    first, second = (block.body for block in blocks("sh", [README])[:2])
    assert first.strip().endswith("pip install . && crc simulate")
    assert second.strip().endswith("pip install '.[test]' && pytest")
    assert "--config deploy/peer-0.toml" in real_peers_block()
    assert real_peers_block() in [block.body for block in blocks("sh", [README])], "the README's three-peer example"
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def environment() -> dict:
    """This interpreter's scripts (its `crc`) first on PATH."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=environment(), capture_output=True, text=True,
                          timeout=SHELL_S)
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A directory with copies of the committed tables under results/, as in a checkout."""
    directory = tmp_path_factory.mktemp("readme")
    (directory / "results").mkdir()
    for table in RESULTS.glob("*.json"):
        shutil.copy(table, directory / "results" / table.name)
    return directory


PEERS_DONE: dict[tuple[Path, str], subprocess.CompletedProcess] = {}
BLOCKS_DONE: set[tuple[Path, str]] = set()


def peer_blocks() -> list[str]:
    """The blocks that run `crc node` peers."""
    return [block.body for block in blocks("sh") if "crc node" in block.body]


def real_peers_block() -> str:
    """The "Real peers" block: three peers started from the config files it writes into deploy/."""
    return next(body for body in peer_blocks() if "--config" in body)


def vertical_peers_block() -> str:
    """The vertical group's block: its peers started from the config files it writes into vdeploy/."""
    return next(body for body in peer_blocks() if "vdeploy/peer-" in body)


def run_peers_block(workspace: Path, body: str) -> subprocess.CompletedProcess:
    """A block of peers, whole, once per workspace, on free ports."""
    if (workspace, body) not in PEERS_DONE:
        script = body
        ports = sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", body)))
        for old, new in zip(ports, free_ports(len(ports))):
            script = script.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
        PEERS_DONE[workspace, body] = bash(script, workspace)
    return PEERS_DONE[workspace, body]


@pytest.mark.parametrize("block", blocks("sh"), ids=str)
def test_every_sh_block_runs(workspace, block):
    body = block.body
    if "crc node" in body:
        done = run_peers_block(workspace, body)
        for name in re.findall(r"--out (\S+)", body):  # every peer's model file, and the predictions
            assert (workspace / name).exists(), done.stderr[-2000:]
        assert "accuracy" in done.stderr or "crc predict" not in body
        return
    if (workspace, body) in BLOCKS_DONE:  # the same block on an earlier page: it ran in this directory
        return
    BLOCKS_DONE.add((workspace, body))
    lines = logical_lines(body)
    skipped = [line for line in lines if any(pattern in line for pattern in NOT_RUN)]
    if not skipped:
        bash(body, workspace)
        return
    for line in lines:
        if line not in skipped:
            bash(line, workspace)
    if any("zsh_source" in line for line in skipped):
        done = subprocess.run(["crc"], env={**environment(), "_CRC_COMPLETE": "zsh_source"}, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and "compdef" in done.stdout


def test_the_bash_completion_script_is_what_click_generates():
    done = subprocess.run(["crc"], env={**environment(), "_CRC_COMPLETE": "bash_source"}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "complete -o nosort -F" in done.stdout


QUOTED = {
    "gap CRC - RC: train": ["simulate"],
    "twonorm: nb on a tree of 10 peers": ["simulate", "--data", "twonorm", "--nodes", "10", "--local-size", "30",
                                          "--rounds", "16"],
}
"""The commands whose summary lines the pages quote in ```text blocks, by the quoted block's first words."""


def quoted_summaries() -> dict[str, list[Block]]:
    """The ```text blocks that quote a summary, by the QUOTED key whose command prints it."""
    return {start: [block for block in blocks("text") if block.body.startswith(start)] for start in QUOTED}


@pytest.mark.parametrize("start", QUOTED)
def test_every_quoted_summary_is_what_its_command_prints(start):
    """The figures a page quotes (the README's gap, the tutorial's summary) are the seeded run's, to the digit."""
    quoting = quoted_summaries()[start]
    assert quoting, f"no page quotes {start!r} any more: update QUOTED"
    printed = run("-q", *QUOTED[start])  # in this process: the same command line, without an interpreter's start-up
    assert printed.exit_code == 0, printed.output
    lines = [line.rstrip() for line in printed.stdout.splitlines()]
    for block in quoting:
        missing = [line for line in block.body.splitlines() if line.rstrip() not in lines]
        assert not missing, f"{block} quotes lines `crc {' '.join(QUOTED[start])}` no longer prints: {missing}"


@pytest.mark.parametrize("args", [
    ["--data", "twonorm", "--nodes", "5", "--local-size", "20", "--byzantine", "1", "--baseline", "--secure-aggregation"],
    ["--data", "twonorm", "--nodes", "5", "--local-size", "20", "--dp-epsilon", "4", "--no-rc-converged"],
    ["--data", "wdbc", "--partition", "hybrid", "--baseline"],
], ids=["attack-baseline-masks", "private", "hybrid"])
def test_the_results_json_page_names_every_key_of_a_run(args):
    """docs/reference/results-json.md left out rc_converged, which every default run writes, and half the options' keys."""
    page = (DOCS / "reference" / "results-json.md").read_text(encoding="utf-8")
    printed = run("-q", "simulate", "--rounds", "2", "--json", *args)
    assert printed.exit_code == 0, printed.output
    results = json.loads(printed.stdout)
    assert not [key for key in [*results, *results["ml"]] if f"`{key}`" not in page]


@pytest.mark.parametrize("block", blocks("python"), ids=str)
def test_every_python_block_runs(workspace, block):
    body = block.body
    if "sklearn" in body:
        pytest.importorskip("sklearn")
    if "load_model" in body:
        run_peers_block(workspace, real_peers_block())
    if "vdeploy/" in body:  # reads the vertical group's model files
        run_peers_block(workspace, vertical_peers_block())
    done = subprocess.run([sys.executable, "-c", body], cwd=workspace, env=environment(), capture_output=True, text=True,
                          timeout=PYTHON_S)
    assert done.returncode == 0, f"{body}\n--- stderr\n{done.stderr[-3000:]}"
