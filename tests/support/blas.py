"""BLAS's thread count as a test reads it."""

from __future__ import annotations

from threadpoolctl import threadpool_info


def blas_threads_now() -> int:
    """The most threads any loaded BLAS library runs on right now."""
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")
