"""How crc uses the CPU's threads: BLAS thread limits, and a small pool for independent blocks of work.

BLAS: the products of a CRC round are many and small, and OpenBLAS would
otherwise wake its threads for each one above its size threshold, which on a
busy machine can stall a call for tens of milliseconds; ``single_threaded_blas``
(threadpoolctl) limits BLAS to one thread while it is open.

Blocks: the circuits' passes (``crc.core.models.region_graph``), a large
pooled residual of the other models (``crc.core.models.base``) and the rounds
of a large network (``crc.core.engine``) cut their work into blocks that are
independent until their results are added up. ``ordered_map`` runs such blocks on up to ``threads()``
threads (numpy releases the GIL inside its array operations) and hands the
results back in block order, so that whoever adds them up does so in the same
order as a serial run: results do not depend on the thread count. While blocks
run, on one thread or several, BLAS is limited to one thread: the two kinds of
threads do not multiply, and a block's bits do not depend on BLAS's thread count
(which BLAS does not promise: a threaded kernel may split a sum).

The thread count is ``CRC_THREADS`` from the environment when set (1 runs
every block in the calling thread), else the usable CPUs, at most
``DEFAULT_MAX_THREADS``; ``set_threads`` changes it for the process (worker
processes of ``crc experiment --jobs`` set 1).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from crc.core.errors import CRCError, plain

try:
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - threadpoolctl is a dependency; without it BLAS keeps its default threads
    ThreadpoolController = None

DEFAULT_MAX_THREADS = 4
"""Most threads used by default: a pass is a few dozen blocks of small numpy calls, and beyond a few threads the
GIL held between calls takes what more threads would give."""
MAX_THREADS = 256
"""Largest value ``CRC_THREADS`` or ``set_threads`` accepts."""

_PREFIX = "crc-block"
_CONTROLLER = None
_LOCK = threading.Lock()
_threads: int | None = None
_pool: ThreadPoolExecutor | None = None

Item = TypeVar("Item")
Result = TypeVar("Result")


def _blas():
    """threadpoolctl's controller of the loaded BLAS libraries, looked up once; None without threadpoolctl."""
    global _CONTROLLER
    if ThreadpoolController is not None and _CONTROLLER is None:
        with _LOCK:
            if _CONTROLLER is None:
                _CONTROLLER = ThreadpoolController().select(user_api="blas")
    return _CONTROLLER


def single_threaded_blas() -> contextlib.AbstractContextManager:
    """A context in which BLAS (OpenBLAS, MKL, BLIS) runs on one thread; a no-op without threadpoolctl.

    The limit is process-wide while the context is open (BLAS thread counts are global).
    """
    blas = _blas()
    return contextlib.nullcontext() if blas is None else blas.limit(limits=1)


def use_single_threaded_blas() -> None:
    """BLAS on one thread from now on, for the rest of the process (a process that runs nothing but cells,
    as a ``crc experiment --cluster`` worker: ``--jobs`` workers get the same from their environment)."""
    blas = _blas()
    if blas is not None:
        blas.limit(limits=1)  # not a context: the limit stays


def blas_threads() -> int | None:
    """The number of threads BLAS uses outside ``single_threaded_blas`` (the largest over the loaded libraries)."""
    blas = _blas()
    return None if blas is None else max((lib.num_threads for lib in blas.lib_controllers), default=None)


def _checked(count, source: str) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_THREADS:
        raise CRCError(f"{source} must be a whole number from 1 to {MAX_THREADS}, got {plain(count)}")
    return count


def _default_threads() -> int:
    text = os.environ.get("CRC_THREADS")
    if text is not None and text.strip():
        try:
            count = int(text)
        except ValueError:
            count = text  # not a whole number: _checked refuses it, quoting it as given
        return _checked(count, "CRC_THREADS")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(DEFAULT_MAX_THREADS, usable))


def threads() -> int:
    """Threads ``ordered_map`` uses (``CRC_THREADS``, ``set_threads`` or the default; see the module docstring)."""
    global _threads
    if _threads is None:
        _threads = _default_threads()
    return _threads


def set_threads(count: int) -> None:
    """Use ``count`` threads (1 to MAX_THREADS) for blocks from now on, in this process."""
    global _threads, _pool
    count = _checked(count, "the thread count")
    with _LOCK:
        if _pool is not None and count != _threads:
            _pool.shutdown(wait=True)
            _pool = None
        _threads = count


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _LOCK:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=threads(), thread_name_prefix=_PREFIX)
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child has none of its parent's threads: it starts a pool (and a lock) of its own when it needs one."""
    global _pool, _LOCK
    _pool, _LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def ordered_map(work: Callable[[Item], Result], items: Iterable[Item]) -> list[Result]:
    """``[work(item) for item in items]``, computed on up to ``threads()`` threads, BLAS on one thread meanwhile.

    With one thread or one item, and inside a block (no nesting), everything runs in the calling thread; BLAS is
    limited whenever there are blocks, on one thread as on several, so that their results are the same bits.
    ``work`` must not depend on another item's call (each may write its own disjoint part of a shared array).
    """
    items = list(items)
    if len(items) < 2 or threading.current_thread().name.startswith(_PREFIX):
        return [work(item) for item in items]
    with single_threaded_blas():
        if threads() == 1:
            return [work(item) for item in items]
        futures = [_executor().submit(work, item) for item in items]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()
