"""Benchmarks of the CRC engine (against a per-node loop and the machine's matrix-product floor, at scale), of the
slower models against naive Bayes, and of real peers, as JSON-ready dicts.

Layer: on top, beside ``crc.cli`` (which calls it for ``crc bench``); it may use
every package but the command line, and nothing imports it but ``crc.cli``.

Timings on a shared machine are noisy, so every comparison is made within one
run: the figures set side by side are measured in the same process,
interleaved (one of each in turn), and the best of ``REPEATS`` is kept, with
the process CPU time (all its threads) beside the wall time.

The benchmarks themselves (``crc.bench.suite``, ``crc.bench.network``) are imported on first use (``LAZY``); here
are only the defaults ``crc bench``'s options show, so that its ``--help`` loads neither the peers nor the simulator.
"""

from crc.core.lazy import lazy_names

TYPE_CHECKING = False  # typing's flag without importing typing
if TYPE_CHECKING:  # imported on first use instead (``LAZY``); named here for type checkers
    from crc.bench.suite import (
        BLAS_PARK_SECONDS,
        FLOOR_SIZE,
        MODEL_CASES,
        engine_versus_loop,
        models_versus_nb,
        peers_run,
        run_flop,
        scale_run,
        vertical_run,
    )

REPEATS = 5
VERTICAL_DATASETS = ("letter", "magic", "optdigits")
VERTICAL_BLOCKS = (2, 4, 8)
SCENARIOS = ("loopback", "wan", "partition", "restart", "late")
"""The network part's scenarios (``crc.bench.network``)."""
NETWORK_ROUNDS = 480
"""Rounds of the scenarios: some 85 ms each over the relay with 16 peers on 2 cores, so that a run lasts about 40 s
and outlasts a 30 s partition by some hundred rounds (light rounds: twonorm, a few ms of CPU each)."""

LAZY = dict.fromkeys(("BLAS_PARK_SECONDS", "FLOOR_SIZE", "MODEL_CASES", "engine_versus_loop", "models_versus_nb",
                      "peers_run", "run_flop", "scale_run", "vertical_run"), "crc.bench.suite")
"""Names available here, each imported from its module on first use."""

__all__ = [
    "BLAS_PARK_SECONDS", "FLOOR_SIZE", "MODEL_CASES", "NETWORK_ROUNDS", "REPEATS", "SCENARIOS", "VERTICAL_BLOCKS",
    "VERTICAL_DATASETS", "engine_versus_loop", "models_versus_nb", "peers_run", "run_flop", "scale_run", "vertical_run",
]


__getattr__, __dir__ = lazy_names(__name__, LAZY, globals())
