"""The named experiment grids: the tables of section IV of the CRC paper.

A table is a set of columns; each column is a change to the paper's default
setting (NB, random tree, n = 50, m_v = 50, 64 rounds, iter = 1, lr = 0.05),
run with the table's algorithm (the paper's for every table of the paper: the
privacy table's too, as its accountant covers one plain local step a round;
the recommended one for the partitions table, which is not the CRC paper's).
Every cell (data set x column) is one simulation with ``repeats`` repeats. The
paper's published figures for ``letter`` (the one data set it shares with the
bundled ones) are kept beside each column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from crc.core.acceleration import DEFAULT_ALGORITHM
from crc.report.kinds import CONVERGENCE, FIRST_ROUND, GAP, LEARNING_CURVE, MODEL_COMPARISON, PARTITIONS, TableKind
from crc.report.model_comparison import DEFAULT_SUFFIX

DEFAULT_DATASETS = ("letter", "magic", "penbased", "satimage", "optdigits", "twonorm", "ring", "texture", "marketing", "mushroom")
TEST_INSTANCES = 2000
"""Every experiment tests on the same 2,000 held-out instances per repeat (the paper does not give its test size)."""
PRIVACY_EPSILONS = (0.5, 1, 2, 4, 8, 16)
"""The privacy table's finite ε columns (issue: gap against ε)."""
REFERENCE_SIZE = 10240
"""Table II's gold standard: RC on 10,240 training instances (or all the data set can spare)."""


@dataclass(frozen=True)
class Column:
    """One column of a table: its key (file names), header, and changes to the default configuration."""

    key: str
    header: str
    overrides: dict = field(default_factory=dict)
    paper_letter: tuple = ()
    all_training: bool = False
    """The pooled training set is every instance the table's test set leaves (``pooled_size`` set per data set)."""


@dataclass(frozen=True)
class Table:
    """A named grid; its ``kind`` (see ``crc.report.kinds``) says what its cells run and report."""

    name: str
    title: str
    kind: TableKind
    columns: tuple[Column, ...]
    note: str = ""
    algorithm: str = "paper"
    """The algorithm of its columns unless ``crc experiment --algorithm`` says otherwise
    (``crc.core.acceleration.ALGORITHMS``): the paper's tables reproduce the paper's algorithm."""
    in_all: bool = True
    """Whether ``crc experiment all`` runs it (the paper's tables and the circuits do; the privacy study does not)."""
    test_size: float = TEST_INSTANCES
    """Every cell's test set: a count, or a fraction of the data set below 1."""
    datasets: tuple = DEFAULT_DATASETS
    """The data sets ``crc experiment`` runs without ``--datasets``."""

    @property
    def needs_curve(self) -> bool:
        return self.kind.needs_curve

    @property
    def central_only(self) -> bool:
        return self.kind.central_only


def _topology_columns(overrides: dict, kinds, letter) -> tuple[Column, ...]:
    return tuple(Column(kind, kind.replace("tree+", "+"), {**overrides, "topology": kind}, (value,))
                 for kind, value in zip(kinds, letter))


SPARSE = ("tree", "tree+10", "tree+20", "tree+40", "tree+80")

TABLES = {
    table.name: table
    for table in (
        Table("table2", "RC test gap by training-set size m, against RC with the reference size", LEARNING_CURVE,
              tuple(Column(f"m{m}", str(m), {"nodes": 1, "local_size": m}, (letter,))
                    for m, letter in zip((20, 40, 80, 160, 320, 640, 1280, 2560, 5120),
                                         (0.77, 0.77, 0.73, 0.44, 0.33, 0.22, 0.13, 0.06, 0.02)))
              + (Column(LEARNING_CURVE.reference, "ref. error", {"nodes": 1, "local_size": REFERENCE_SIZE}, (0.19,)),),
              note=f"Reference: RC with m = {REFERENCE_SIZE} training instances, or all a data set can spare besides "
                   f"its {TEST_INSTANCES} test instances (the 'ref. m' column)."),
        Table("table3", "Convergence of local models at round 64: gaps to RC, spread across nodes, RC error", CONVERGENCE,
              (Column("default", "default", {}, (0.50, 0.75, 0.00, 0.06, 0.38, 0.58, 0.00, 0.26)),)),
        Table("table4", "Test gap CRC - RC by sparse topology (n = 50)", GAP,
              _topology_columns({}, ("tree", "chain") + SPARSE[1:], (0.46, 0.37, 0.46, 0.49, 0.51, 0.52))),
        Table("table5", "Test gap under covariate drift p(x) (sorted by first principal component)", GAP,
              _topology_columns({"partition": "covariate"}, SPARSE, (0.47, 0.56, 0.61, 0.63, 0.64))),
        Table("table6", "Test gap under label drift p(y) (each node one class)", GAP,
              _topology_columns({"partition": "label"}, SPARSE, (0.70,) * 5)),
        Table("table7", "Test gap under joint drift p(x, y)", GAP,
              _topology_columns({"partition": "joint"}, SPARSE, (0.70,) * 5)),
        Table("table8", "Test gap by local size m_v (n = 50, RC on m = 50 m_v)", GAP,
              tuple(Column(f"mv{mv}", f"m_v={mv}", {"local_size": mv}, (letter,))
                    for mv, letter in zip((20, 40, 80, 160, 320), (0.61, 0.68, 0.09, 0.07, 0.04)))),
        Table("table9", "Test gap by network size n (m_v = 50, RC on m = 50 n)", GAP,
              tuple(Column(f"n{n}", f"n={n}", {"nodes": n}, (letter,))
                    for n, letter in zip((20, 40, 80, 160, 320), (0.39, 0.50, 0.28, 0.28, 0.24))),
              note="The paper reports the best round per seed here; we report round 64 as everywhere else."),
        Table("table10", "Test gap by fragmentation: m = 12800 shared by n nodes", GAP,
              tuple(Column(f"n{n}", f"n={n} (m_v={12800 // n})", {"nodes": n, "pooled_size": 12800}, (letter,))
                    for n, letter in zip((20, 40, 80, 160, 320), (0.02, 0.04, 0.07, 0.11, 0.74)))),
        Table("table11", "Test gap at round 64 and first round with gap < 0.01, by local iterations", FIRST_ROUND,
              tuple(Column(f"iter{i}", f"iter={i}", {"iters": i}, (letter, 64))
                    for i, letter in zip((1, 2, 3), (0.59, 0.59, 0.58)))),
        Table("circuits", "NB, QDA and probabilistic circuits under ML, RC and CRC, the paper's algorithm beside the "
              "default one", MODEL_COMPARISON,
              tuple(Column(key + suffix, f"{header}, {name}", {**overrides, **extra})
                    for key, header, overrides in (
                        ("nb", "NB", {"model": "nb", "components": 1, "baseline": True}),
                        ("qda", "QDA", {"model": "qda", "components": 1, "baseline": True}),
                        *((f"pc{k}", f"PC K={k}", {"model": "pc", "components": k, "baseline": True}) for k in (2, 4, 8)),
                        ("pc-rg", "PC region graph", {"model": "pc", "structure": "region-graph", "depth": 2,
                                                      "repetitions": 2, "sums": 2, "baseline": True}))
                    for suffix, name, extra in (("", "paper", {"algorithm": "paper"}),
                                                (DEFAULT_SUFFIX, "default", {"algorithm": DEFAULT_ALGORITHM,
                                                                             "rc_converged": False}))),
              note="PC K=k: a sum node over k factorized products per class. PC region graph: 2 random binary "
                   "splits of the features to depth 2, 2 sum nodes per region, 2 leaf channels per leaf region. "
                   "paper: the paper's algorithm; default: the default one (exact diffusion, 2 local steps per "
                   "round; naive Bayes 3 from its local category counts, its classifier's counts averaged over the "
                   "rounds, the region graph from its local start; "
                   "centralized RC is not also run to convergence in its cells). Made by `crc experiment "
                   "circuits` (5 repeats)."),
        Table("privacy", "Test gap CRC - RC under differential privacy, by the peers' ε (δ = 1e-5, over 64 releases)", GAP,
              tuple(Column(f"eps{e:g}", f"ε={e:g}", {"dp_epsilon": e}) for e in PRIVACY_EPSILONS)
              + (Column("eps-inf", "ε=∞", {}),),
              note="Every peer clips its standardized continuous values to [-B, B] (--clip, default 1) and releases each "
                   "round's statistics with Gaussian noise solved for (ε, δ) over the 64 rounds by the PLD accountant; "
                   "ε=∞ is the paper's algorithm (no clipping, no noise). Not a table of the paper.", in_all=False),
        Table("fedpc", "Horizontal, vertical and hybrid partitions: accuracy and F1 of CRC, centralized RC and FedPC's "
              "one-pass baseline, beside the federated-circuits paper's Table 6", PARTITIONS,
              tuple(Column(f"{key}-{model}", f"{header}, {model.upper()}",
                           {"model": model, "partition": partition, "baseline": True, "rc_converged": False, **extra},
                           all_training=True)
                    for key, header, partition, extra in (("h5", "horizontal, 5 peers", "iid", {"nodes": 5}),
                                                          ("h10", "horizontal, 10 peers", "iid", {"nodes": 10}),
                                                          ("v2", "vertical, 2 peers", "vertical:2", {}),
                                                          ("v3", "vertical, 3 peers", "vertical:3", {}),
                                                          ("y2", "hybrid 2x2, 4 peers", "hybrid:2", {}),
                                                          ("y3", "hybrid 3x3, 9 peers", "hybrid:3", {}))
                    for model in ("nb", "qda", "pc")),
              note="Every cell trains on all the instances its test set (20 %) leaves. Horizontal: the peers on a "
                   "random tree, the default algorithm; the baseline is FedPC's horizontal one-pass circuit, a sum "
                   "node over the peers' own ML models (the mixture of nodes). Vertical: one group of peers holds "
                   "every training instance, each a block of the features; CRC is centralized RC of the block model, "
                   "run by the peers. Hybrid GxG: G groups of instances x G blocks of features. PC: the mixture of "
                   "K = 2 block products. FedPC one-pass: Algorithm 1 of the paper with naive-Bayes leaf circuits "
                   "(crc.protocol.fedpc). german stands in for the paper's credit data.",
              in_all=False, test_size=0.2, datasets=("wdbc", "german"), algorithm=DEFAULT_ALGORITHM),
        Table("blocks", "Vertical partitions: the mixture of block products against the plain products and FedPC's "
              "one-pass baseline, on data sets whose features depend on each other across the blocks", PARTITIONS,
              tuple(Column(f"v{k}-{key}", f"vertical, {k} peers, {header}",
                           {"model": model, "partition": f"vertical:{k}", "baseline": True, "rc_converged": False,
                            **extra}, all_training=True)
                    for k in (2, 4)
                    for key, header, model, extra in (("nb", "NB", "nb", {}), ("qda", "QDA per block", "qda", {}),
                                                      ("pc2", "PC K=2", "pc", {"components": 2}),
                                                      ("pc4", "PC K=4", "pc", {"components": 4}))),
              note="One group of peers holds every training instance (all the instances the test set, 20 %, leaves), "
                   "each a block of the features (a seeded cut into near-equal blocks); CRC is centralized RC of "
                   "the block model, run by the peers, so CRC equals RC. NB: naive Bayes (a product over blocks "
                   "is naive Bayes). QDA per block: one covariance per block, none between blocks. PC K: a latent "
                   "mixture of K naive-Bayes block products, whose component couples the blocks. FedPC one-pass: "
                   "Algorithm 1 of the federated-circuits paper with naive-Bayes leaf circuits.",
              in_all=False, test_size=0.2, datasets=("magic", "letter", "satimage", "penbased"),
              algorithm=DEFAULT_ALGORITHM),
        Table("table12", "Test gap by period of a dynamic network (a fresh random tree every period rounds)", GAP,
              tuple(Column(f"period{p}", "∞" if p == math.inf else str(p), {} if p == math.inf else {"period": p}, (letter,))
                    for p, letter in zip((math.inf, 8, 4, 2, 1), (0.59, 0.57, 0.57, 0.57, 0.57)))),
    )
}
