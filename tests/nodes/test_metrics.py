"""A peer's metrics: the copy a scrape takes, and the Prometheus endpoint in-process (what a scrape returns after a
few updates, read afresh at every scrape, the port released on close)."""

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from crc.core.errors import CRCError
from crc.nodes.launcher import free_ports
from crc.nodes.metrics import Metrics, MetricsEndpoint, Reading
from crc.nodes.wire import CAUSES as WIRE_CAUSES

A, B = "tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert answer.status == 200 and answer.headers["Content-Type"].startswith("text/plain")
        return answer.read().decode()


def samples(text: str) -> dict:
    """(name, sorted label items) -> value of every sample."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def metrics():
    return Metrics.for_neighbours((A, B))


@pytest.fixture
def endpoint(metrics):
    state = {"down": frozenset(), "epsilon_spent": 0.0}
    (port,) = free_ports(1)
    served = MetricsEndpoint(lambda: Reading(metrics.copy(), bind="tcp://127.0.0.1:7000", run="trial", rounds=10,
                                             neighbours=(A, B), down=state["down"], epsilon=2.0,
                                             epsilon_spent=state["epsilon_spent"]),
                             host="127.0.0.1", port=port)
    try:
        yield served, state
    finally:
        served.close()


def play_rounds(metrics: Metrics) -> None:
    """Three rounds of 4 ms, 20 ms and 0.7 s; 6 messages sent, 5 received, 3 rejected; B missed twice."""
    for ms, loss in ((4.0, 0.5), (20.0, 0.4), (700.0, 0.3)):
        metrics.rounds_done += 1
        metrics.round_ms.append(ms)
        metrics.soft_loss.append(loss)
        metrics.count_sent(2, 1000)
    metrics.messages_received, metrics.bytes_received = 5, 5000
    for cause in ("stale", "stale", "forged"):
        metrics.count_rejected(cause)
    metrics.missing[B] = 2
    metrics.count_refused({}, {"unknown-key": 1})
    metrics.unmask_fallbacks = 1


def test_a_scrape_returns_the_counts_after_a_few_updates(metrics, endpoint):
    served, state = endpoint
    play_rounds(metrics)
    state["down"] = frozenset({B})
    state["epsilon_spent"] = 0.75
    got = samples(scrape(served.url))
    assert got[("crc_peer_info", (("bind", "tcp://127.0.0.1:7000"), ("run", "trial")))] == 1
    assert got[("crc_peer_round", ())] == 3 and got[("crc_peer_run_rounds", ())] == 10
    assert got[("crc_peer_neighbours", (("state", "up"),))] == 1 and got[("crc_peer_neighbours", (("state", "down"),))] == 1
    assert got[("crc_peer_neighbour_up", (("peer", A),))] == 1 and got[("crc_peer_neighbour_up", (("peer", B),))] == 0
    assert got[("crc_peer_neighbour_missed_rounds_total", (("peer", B),))] == 2
    assert got[("crc_peer_messages_sent_total", ())] == 6 and got[("crc_peer_sent_bytes_total", ())] == 6000
    assert got[("crc_peer_messages_received_total", ())] == 5 and got[("crc_peer_received_bytes_total", ())] == 5000
    rejected = {dict(labels)["cause"]: value for (name, labels), value in got.items()
                if name == "crc_peer_messages_rejected_total"}
    assert set(rejected) == set(WIRE_CAUSES) and rejected["stale"] == 2 and rejected["forged"] == 1
    assert sum(rejected.values()) == 3
    assert got[("crc_peer_connections_refused_total", (("cause", "unknown-key"),))] == 1
    assert got[("crc_peer_unmask_fallbacks_total", ())] == 1
    bucket = {dict(labels)["le"]: value for (name, labels), value in got.items() if name == "crc_peer_round_duration_seconds_bucket"}
    assert (bucket["0.005"], bucket["0.01"], bucket["0.025"], bucket["0.5"], bucket["1.0"], bucket["+Inf"]) == (1, 1, 2, 2, 3, 3)
    assert got[("crc_peer_round_duration_seconds_count", ())] == 3
    assert got[("crc_peer_round_duration_seconds_sum", ())] == pytest.approx(0.724)
    assert got[("crc_peer_last_round_duration_seconds", ())] == pytest.approx(0.7)
    assert got[("crc_peer_local_soft_loss", ())] == pytest.approx(0.3)
    assert got[("crc_peer_privacy_epsilon", ())] == 2.0 and got[("crc_peer_privacy_epsilon_spent", ())] == 0.75


def test_every_scrape_reads_the_peer_afresh(metrics, endpoint):
    served, _ = endpoint
    before = samples(scrape(served.url))
    assert before[("crc_peer_round", ())] == 0 and before[("crc_peer_round_duration_seconds_count", ())] == 0
    assert ("crc_peer_last_round_duration_seconds", ()) not in before  # no round yet: no last round time
    play_rounds(metrics)
    after = samples(scrape(served.url))
    assert after[("crc_peer_round", ())] == 3 and after[("crc_peer_messages_sent_total", ())] == 6


def test_the_text_follows_prometheus_naming(metrics, endpoint):
    served, _ = endpoint
    text = scrape(served.url)
    assert "# TYPE crc_peer_messages_rejected_total counter" in text
    assert "# TYPE crc_peer_round_duration_seconds histogram" in text
    assert "# TYPE crc_peer_round gauge" in text
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("crc_peer")
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)


def test_closing_the_endpoint_releases_its_port(metrics):
    (port,) = free_ports(1)
    served = MetricsEndpoint(lambda: Reading(metrics, bind="b", run="r", rounds=1, neighbours=(), down=frozenset()),
                             host="127.0.0.1", port=port)
    assert "crc_peer_round 0.0" in scrape(served.url)
    served.close()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    again = MetricsEndpoint(lambda: Reading(metrics, bind="b", run="r", rounds=1, neighbours=(), down=frozenset()),
                            host="127.0.0.1", port=port)
    again.close()


def test_a_port_in_use_is_an_os_error(metrics):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            MetricsEndpoint(lambda: None, host="127.0.0.1", port=taken.getsockname()[1])


def test_a_copy_does_not_change_with_the_peer(metrics):
    play_rounds(metrics)
    copy = metrics.copy()
    metrics.count_rejected("stale")
    metrics.round_ms.append(1.0)
    metrics.missing[A] = 9
    assert copy.rejected["stale"] == 2 and len(copy.round_ms) == 3 and copy.missing[A] == 0
    assert copy.to_json() != metrics.to_json() and Metrics.from_json(copy.to_json()) == copy


@pytest.mark.parametrize("name", ["round_ms", "soft_loss"])
def test_a_checkpoint_s_metrics_list_longer_than_its_rounds_is_refused(name):
    """A peer adds at most one entry a round (and a vertical group's peer one for its start): a checkpoint whose header
    held 3 million round times made a peer resumed from it take 660 MB and write them into every checkpoint and its
    model file."""
    assert Metrics.from_json({"rounds_done": 2, name: [1.0, 2.0, 3.0]}).rounds_done == 2  # a vertical peer's start
    with pytest.raises(CRCError, match=f"metric '{name}' holds 4 entries, more than the 2 rounds done and the start"):
        Metrics.from_json({"rounds_done": 2, name: [1.0, 2.0, 3.0, 4.0]})
