"""crc.core.threads: the thread count's sources and checks, and ordered_map's order, nesting and errors."""

import threading

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from crc.core import threads
from crc.core.errors import CRCError


@pytest.fixture
def restore_threads():
    before = threads.threads()
    yield
    threads.set_threads(before)


def test_the_environment_sets_the_count_and_bad_values_are_clear_errors(monkeypatch):
    monkeypatch.setenv("CRC_THREADS", " 3 ")
    assert threads._default_threads() == 3
    for bad in ("0", "-2", "two", "1.5", str(threads.MAX_THREADS + 1)):
        monkeypatch.setenv("CRC_THREADS", bad)
        with pytest.raises(CRCError, match="CRC_THREADS must be a whole number"):
            threads._default_threads()
    monkeypatch.delenv("CRC_THREADS")
    assert 1 <= threads._default_threads() <= threads.DEFAULT_MAX_THREADS


@pytest.mark.usefixtures("restore_threads")
def test_set_threads_checks_its_argument():
    for bad in (0, True, 2.0, threads.MAX_THREADS + 1):
        with pytest.raises(CRCError, match="thread count"):
            threads.set_threads(bad)
    threads.set_threads(2)
    assert threads.threads() == 2


@pytest.mark.usefixtures("restore_threads")
@pytest.mark.parametrize("count", [1, 2, 4])
def test_ordered_map_keeps_the_order_and_runs_on_the_pool(count):
    threads.set_threads(count)
    names = set()

    def work(item):
        names.add(threading.current_thread().name)
        return item * item

    assert threads.ordered_map(work, range(40)) == [i * i for i in range(40)]
    assert all(name.startswith("crc-block") for name in names) == (count > 1)


@pytest.mark.usefixtures("restore_threads")
@pytest.mark.parametrize("count", [1, 2])
def test_blocks_run_with_blas_on_one_thread_on_any_thread_count(count):
    """BLAS's bits may depend on its thread count: blocks see one BLAS thread whether they run inline or on the pool."""
    threads.set_threads(count)
    with threadpool_limits(limits=2, user_api="blas"):
        assert threads.ordered_map(lambda _: _blas_threads_now(), range(4)) == [1] * 4
        assert threads.ordered_map(lambda _: _blas_threads_now(), range(1)) == [2]  # one item: no blocks, no limit


def _blas_threads_now() -> int:
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


@pytest.mark.usefixtures("restore_threads")
def test_a_block_that_maps_again_runs_inline_and_errors_reach_the_caller():
    threads.set_threads(2)

    def outer(item):
        return threads.ordered_map(lambda inner: (threading.current_thread().name, item + inner), range(3))

    for row in threads.ordered_map(outer, range(4)):
        assert len({name for name, _ in row}) == 1  # the inner calls ran in the outer block's thread

    def fails(item):
        if item == 5:
            raise CRCError("block 5")
        return item

    with pytest.raises(CRCError, match="block 5"):
        threads.ordered_map(fails, range(10))
    assert threads.ordered_map(fails, range(3)) == [0, 1, 2]  # the pool still works
