"""``crc status``: one line per peer from its metrics endpoint; unreachable peers and answers that are not a peer's
metrics shown as such (exit 1); and three real peers started from config files only, watched while they run."""

import http.server
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from crc.cli.main import main
from crc.cli.status import MAX_RESPONSE_BYTES, metrics_url
from crc.nodes.launcher import free_ports
from crc.nodes.metrics import Metrics, MetricsEndpoint, Reading
from crc.protocol.rules import MAX_ROUNDS

A, B = "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"
PEERS_UP_S = 120.0
"""Longest wait for three fresh peer processes to serve their metrics and finish their first rounds (2 busy cores)."""
STOP_S = 20.0


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def peer_endpoint():
    metrics = Metrics.for_neighbours((A, B))
    for ms in (4.0, 20.0, 700.0):
        metrics.rounds_done += 1
        metrics.round_ms.append(ms)
        metrics.count_sent(2, 1000)
    metrics.messages_received = 5
    for cause in ("stale", "stale", "forged"):
        metrics.count_rejected(cause)
    metrics.unmask_fallbacks = 2
    (port,) = free_ports(1)
    served = MetricsEndpoint(lambda: Reading(metrics.copy(), bind="tcp://127.0.0.1:7000", run="crc", rounds=10,
                                             neighbours=(A, B), down=frozenset({B}), epsilon=2.0, epsilon_spent=0.5),
                             host="127.0.0.1", port=port)
    try:
        yield port
    finally:
        served.close()


class _Answers(http.server.BaseHTTPRequestHandler):
    """Answers by path: /big (too large), /junk (not Prometheus text), /other (another program's metrics),
    /slow (later than the timeout), /drip (headers a byte at a time, never done), /moved (a redirect)."""

    def do_GET(self):
        if self.path == "/slow":
            time.sleep(1.5)
        if self.path == "/drip":  # each byte within any socket timeout, the headers never done
            for byte in b"HTTP/1.0 200 OK\r\nX-Wait: " + b"w" * 200:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
            return
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:1/metrics")
            self.end_headers()
            return
        body = {"/big": b"x 1\n" * (MAX_RESPONSE_BYTES // 4 + 1), "/junk": b"{this is not} prometheus\n",
                "/other": b"# TYPE up gauge\nup 1\n"}.get(self.path, b"crc_peer_round 1\n")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def odd_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    server.daemon_threads, server.block_on_close = True, False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_one_line_per_peer_from_its_metrics(peer_endpoint):
    result = run("status", f"127.0.0.1:{peer_endpoint}", f"http://127.0.0.1:{peer_endpoint}/metrics")
    assert result.exit_code == 0, result.output
    expected = ("tcp://127.0.0.1:7000  round 3/10  neighbours 1 up, 1 down  messages 6 sent, 5 received, 3 rejected "
                "(forged 1, stale 2)  last round 0.700 s  2 round(s) without a sum  privacy ε 0.5 of 2 spent")
    assert result.output.splitlines() == [f"127.0.0.1:{peer_endpoint}  {expected}",
                                          f"http://127.0.0.1:{peer_endpoint}/metrics  {expected}"]


def test_an_unreachable_peer_is_shown_as_such_and_exits_1(peer_endpoint):
    (closed,) = free_ports(1)
    started = time.monotonic()
    result = run("status", f"127.0.0.1:{peer_endpoint}", f"127.0.0.1:{closed}")
    assert result.exit_code == 1 and time.monotonic() - started < 10
    lines = result.output.splitlines()
    assert lines[0].startswith(f"127.0.0.1:{peer_endpoint}  tcp://127.0.0.1:7000  round 3/10")
    assert lines[1].startswith(f"127.0.0.1:{closed}  unreachable: ") and "refused" in lines[1].lower()
    assert lines[2] == "Error: 1 of 2 peer(s) unreachable"


@pytest.mark.parametrize("path, problem", [
    ("/big", f"answer larger than {MAX_RESPONSE_BYTES} bytes"),
    ("/junk", "not Prometheus text"),
    ("/other", "no crc_peer_round metric: not a crc peer's endpoint"),
    ("/slow", "within 0.5 s"),
    ("/drip", "within 0.5 s"),  # it waited for the headers 10 s, and hours for a slower drip
    ("/moved", "HTTP 302"),
])
def test_an_answer_that_is_not_a_peers_metrics_is_refused(odd_server, path, problem):
    started = time.monotonic()
    result = run("status", "--timeout", "0.5", odd_server + path)
    assert result.exit_code == 1, result.output
    line = result.output.splitlines()[0]
    assert line.startswith(f"{odd_server}{path}  unreachable: ") and problem in line, line
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("target, url", [
    ("10.0.0.5:9100", "http://10.0.0.5:9100/metrics"),
    ("peer.example:9100", "http://peer.example:9100/metrics"),
    ("http://10.0.0.5:9100", "http://10.0.0.5:9100/metrics"),
    ("https://10.0.0.5/crc/metrics", "https://10.0.0.5/crc/metrics"),
])
def test_targets_are_host_and_port_or_urls(target, url):
    assert metrics_url(target) == url


@pytest.mark.parametrize("target", ["9100", "host:0", "host:99999", "file:///etc/passwd", "ftp://host/x", "http://"])
def test_a_malformed_target_is_a_usage_error(target):
    result = run("status", target)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"Error: Invalid value for 'HOST:PORT|URL...': {target!r}: give HOST:PORT" in result.output


STATUS_LINE = re.compile(r"^127\.0\.0\.1:(\d+)  (tcp://127\.0\.0\.1:\d+)  round (\d+)/(\d+)  neighbours (\d+) up, (\d+) down  "
                         r"messages (\d+) sent, (\d+) received, (\d+) rejected  last round (-|\d+\.\d+ s)$")


def _status(ports) -> list[re.Match] | None:
    """The status lines of the peers on ``ports`` if every one answered and completed a round; else None."""
    result = run("status", *(f"127.0.0.1:{port}" for port in ports))
    if result.exit_code != 0:
        return None
    found = [STATUS_LINE.match(line) for line in result.output.splitlines()]
    assert all(found), result.output
    return found if all(int(match[3]) >= 1 for match in found) else None


def test_three_real_peers_from_config_files_watched_while_they_run(tmp_path):
    ports = free_ports(6)
    addresses = [f"tcp://127.0.0.1:{port}" for port in ports[:3]]
    metrics_ports = ports[3:]
    result = run("split", "--data", "twonorm", "--nodes", "3", "--local-size", "30", "--test-size", "200",
                 "--out", tmp_path / "deploy", "--keys-for", ",".join(addresses))
    assert result.exit_code == 0, result.output
    for index, port in enumerate(metrics_ports):
        with open(tmp_path / "deploy" / f"peer-{index}.toml", "a") as config:
            # The most rounds a run may take: the peers are stopped below, so the scrapes cannot miss the run.
            config.write(f"metrics-port = {port}\nrounds = {MAX_ROUNDS}\nlog-level = \"warning\"\n")
    logs = [open(tmp_path / f"peer-{index}.log", "wb") for index in range(3)]  # noqa: SIM115 (closed below)
    peers = []
    try:
        for index in range(3):  # the configuration file is all a peer is given
            peers.append(subprocess.Popen([sys.executable, "-m", "crc", "node", "--config", f"deploy/peer-{index}.toml"],
                                          cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=logs[index]))
        deadline = time.monotonic() + PEERS_UP_S
        first = None
        while first is None and time.monotonic() < deadline:
            assert all(peer.poll() is None for peer in peers), "a peer exited"
            first = _status(metrics_ports)
            if first is None:
                time.sleep(0.2)
        assert first is not None, f"the peers' endpoints did not answer with a completed round within {PEERS_UP_S:g} s"
        assert [match[2] for match in first] == addresses
        for match in first:
            assert int(match[4]) == MAX_ROUNDS and (match[5], match[6]) == ("2", "0")  # both neighbours up
            assert int(match[7]) >= 2 and int(match[9]) == 0  # sent to both neighbours; nothing rejected
        later = None
        while later is None and time.monotonic() < deadline:
            time.sleep(0.5)
            now = _status(metrics_ports)
            if now is not None and all(int(n[3]) > int(f[3]) for n, f in zip(now, first)):
                later = now
        assert later is not None, "the peers' rounds did not advance between two scrapes"
        assert all(int(match[8]) >= 2 for match in later)  # statistics received from the neighbours
        shown = subprocess.run([sys.executable, "-m", "crc", "status", *(f"127.0.0.1:{p}" for p in metrics_ports)],
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert len(shown.stdout.splitlines()) == 3 and all(STATUS_LINE.match(line) for line in shown.stdout.splitlines())
        print(shown.stdout)
    finally:
        for peer in peers:
            if peer.poll() is None:
                peer.send_signal(signal.SIGTERM)
        for peer in peers:
            try:
                peer.wait(STOP_S)
            except subprocess.TimeoutExpired:
                peer.kill()
                peer.wait(STOP_S)
        for log in logs:
            log.close()
    assert [peer.returncode for peer in peers] == [128 + signal.SIGTERM] * 3  # stopped by SIGTERM, not failed
    gone = run("status", *(f"127.0.0.1:{port}" for port in metrics_ports))
    assert gone.exit_code == 1 and gone.output.count("  unreachable: ") == 3
