"""A class-conditional product over disjoint feature blocks: the model of vertically partitioned data.

When peers hold different features of the same instances, peer ``b`` holds
block ``b`` of the features and the statistics of its own block model. Given
the class the blocks are independent,

    log p(x, y) = log p(y) + sum_b log p_b(x_b | y),

so the pooled log-joint is the sum of the blocks' scores plus one log-prior,
and centralized RC of this model can be run exactly by peers that each score
their block (``crc.protocol.vertical``). For naive Bayes the product over any
blocks is naive Bayes itself; for QDA it is QDA with one covariance per block
(block-diagonal), which loses the covariances between blocks.

The statistics are the blocks' statistics side by side in one table of a row
per class: the columns of block ``b`` are ``layout.columns(f"block{b}")`` and
hold block ``b``'s own table. Every block keeps its own class counts (its
column 0); calibration adds the same residual weights to each, so they stay
equal, and the class prior is read from block 0.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel, LinearFamilyModel
from crc.core.models.circuit import SPREAD, MixtureCircuit, seeded_leaves
from crc.core.models.layout import Layout
from crc.core.models.naive_bayes import NaiveBayes
from crc.core.models.qda import QDA
from crc.core.schema import Schema

BLOCK_KINDS = ("nb", "qda")
"""Model kinds whose block product is built: linear models with the class count in column 0 and a log-prior."""


def block_schema(schema: Schema, columns: list[int]) -> Schema:
    """The schema of the features at ``columns`` (same label and classes)."""
    return replace(schema, features=tuple(schema.features[j] for j in columns))


def check_blocks(blocks: list[list[int]], n_features: int) -> None:
    """A CRCError unless ``blocks`` are non-empty, disjoint and cover features 0 .. n_features - 1."""
    if not blocks:
        raise CRCError("a vertical partition needs at least one feature block")
    seen: set[int] = set()
    for b, block in enumerate(blocks):
        if not block:
            raise CRCError(f"feature block {b} is empty")
        for j in block:
            if not 0 <= j < n_features:
                raise CRCError(f"feature block {b} names feature {j}, outside the schema's {n_features} features")
            if j in seen:
                raise CRCError(f"feature {j} is in two blocks: vertical blocks must be disjoint")
            seen.add(j)
    if len(seen) != n_features:
        missing = sorted(set(range(n_features)) - seen)
        raise CRCError(f"the feature blocks do not cover the schema: feature(s) {missing[:5]} are in no block")


class BlockProduct(LinearFamilyModel):
    """log p(x, y) = log p(y) + sum_b log p_b(x_b | y) over disjoint feature ``blocks``, each a model of ``kind``.

    Parameters
    ----------
    kind : str
        The blocks' model kind, one of ``BLOCK_KINDS``.
    schema : Schema
        The whole schema; block ``b`` models the features at ``blocks[b]``.
    blocks : list of list of int
        Disjoint feature indices covering the schema, one list per block.
    """

    def __init__(self, kind: str, schema: Schema, blocks: list[list[int]], **options):
        from crc.core.models import make_model  # the registry imports this module's siblings

        if kind not in BLOCK_KINDS:
            raise CRCError(f"a vertical partition needs a model whose class-conditional factorises over feature "
                           f"blocks: {', '.join(BLOCK_KINDS)}, not {kind!r}")
        check_blocks(blocks, len(schema.features))
        self.kind = kind
        self.blocks = [list(block) for block in blocks]
        self.parts = [make_model(kind, block_schema(schema, block), **options) for block in self.blocks]
        super().__init__(schema)

    def _layout(self) -> Layout:
        return Layout(self.n_classes, tuple((f"block{b}", part.layout.n_columns) for b, part in enumerate(self.parts)))

    def _structure_digest(self) -> str:
        return "blocks:" + ";".join(",".join(map(str, block)) for block in self.blocks)

    @property
    def options(self) -> dict:
        return self.parts[0].options

    def block_columns(self, b: int) -> slice:
        """Columns of block ``b`` in a row of the table (and in the feature map)."""
        return self.layout.columns(f"block{b}")

    def block_statistics(self, s: np.ndarray, b: int) -> np.ndarray:
        """Block ``b``'s own flat statistics (..., size_b) from the product's (..., size)."""
        table = self.table(s)[..., :, self.block_columns(b)]
        return table.reshape(table.shape[:-2] + (self.parts[b].size,))

    def join(self, block_stats: list[np.ndarray]) -> np.ndarray:
        """The product's statistics (..., size) from every block's (..., size_b)."""
        tables = [part.table(s) for part, s in zip(self.parts, block_stats)]
        table = np.concatenate(tables, axis=-1)
        return table.reshape(table.shape[:-2] + (self.size,))

    def ess(self, s: np.ndarray) -> np.ndarray:
        return self.parts[0].ess(self.block_statistics(s, 0))

    def features(self, x: np.ndarray) -> np.ndarray:
        """(m, d) encoded instances -> (m, k): the blocks' feature maps side by side."""
        return np.concatenate([part.features(x[:, block]) for part, block in zip(self.parts, self.blocks)], axis=1)

    def theta(self, s: np.ndarray) -> dict:
        """Block ``b``'s parameters under key ``b`` (its own dict), and the class log-prior of block 0."""
        thetas = {b: part.theta(self.block_statistics(s, b)) for b, part in enumerate(self.parts)}
        return {"log_prior": thetas[0]["log_prior"], "blocks": thetas}

    def block_scores(self, theta: dict, phi: np.ndarray, b: int) -> np.ndarray:
        """log p_b(x_b | y) of shape (..., m, r): what the peer holding block ``b`` contributes, from its feature map."""
        part, own = self.parts[b], theta["blocks"][b]
        return part.log_joint(own, phi[..., self.block_columns(b)]) - own["log_prior"][..., None, :]

    def natural(self, theta: dict) -> np.ndarray:
        """The blocks' natural parameters side by side (..., r, k), each block's log-prior taken out of its
        constant column (column 0) and the product's added once."""
        etas = []
        for part, own in zip(self.parts, theta["blocks"].values()):
            eta = np.array(part.natural(own))
            eta[..., 0] -= own["log_prior"]
            etas.append(eta)
        out = np.concatenate(etas, axis=-1)
        out[..., 0] += theta["log_prior"]
        return out

    def uniform(self, m0: float) -> np.ndarray:
        return self.join([part.uniform(m0) for part in self.parts])

    def keep_variances(self, stats: np.ndarray, reference: np.ndarray, fraction: float) -> np.ndarray:
        return self.join([part.keep_variances(self.block_statistics(stats, b), self.block_statistics(reference, b), fraction)
                          for b, part in enumerate(self.parts)])

    def record_bound(self, clip: float) -> float:
        """||phi(x)|| of the joined map: the blocks' bounds add in squares."""
        return float(np.sqrt(sum(part.record_bound(clip) ** 2 for part in self.parts)))

    def seeded_rows(self, count: float, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` table rows (n, n_columns) of weight ``count`` whose leaves are drawn from ``rng`` block by block
        (``seeded_block_rows``): the symmetry-breaking start of a mixture over block products."""
        return np.concatenate([seeded_block_rows(part, count, n, rng) for part in self.parts], axis=1)


def seeded_block_rows(part: GenerativeModel, count: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rows (n, part's n_columns) of one block's statistics of weight ``count``, count column included:
    Gaussian leaves of mean ``SPREAD * z`` (z standard normal) and unit (co)variance, seeded category probabilities
    (``crc.core.models.circuit.seeded_leaves`` for naive Bayes)."""
    counts = np.full((n, 1), count)
    if isinstance(part, NaiveBayes):
        return np.concatenate([counts, seeded_leaves(part, count, n, rng)], axis=1)
    if not isinstance(part, QDA):
        raise CRCError(f"no seeded start for {part.kind!r} blocks")
    dc, categorical = len(part.continuous), part.categorical
    rows = []
    for _ in range(n):
        mean = SPREAD * rng.standard_normal(dc)
        outer = (np.eye(dc) + np.outer(mean, mean))[part.upper]
        raw = 1.0 + rng.random(categorical.width)
        totals = np.repeat(np.add.reduceat(raw, categorical.offsets), categorical.sizes) if categorical.width else raw
        rows.append(np.concatenate([[count], count * mean, count * outer, count * raw / totals]))
    return np.array(rows)


class BlockMixture(MixtureCircuit):
    """A latent mixture of block products: p(x, y) = sum_k p(y, k) prod_b p_b(x_b | y, k).

    The product over blocks of FedPC's vertical circuits, with a latent component that couples the blocks: given
    (y, k) the blocks are independent, so a group of peers sums its blocks' scores of every (y, k) sub-class exactly
    like a block product's class scores, and the component responsibilities q(k | x, y) come from those sums.
    Its statistics are those of a block product over the r K sub-classes (``MixtureCircuit`` with block-product
    leaves); EM gives the ML start, RC steps calibrate it.
    """

    structure = "block-mixture"

    def __init__(self, kind: str, schema: Schema, blocks: list[list[int]], **options):
        self.block_kind, self.blocks = kind, [list(block) for block in blocks]
        super().__init__(schema, **options)

    def _leaves(self, subclasses: Schema) -> GenerativeModel:
        return BlockProduct(self.block_kind, subclasses, self.blocks)

    def _structure_digest(self) -> str:
        return f"{super()._structure_digest()}:{self.leaves._structure_digest()}"

    def _seeded_rows(self, count: float, rng: np.random.Generator) -> np.ndarray:
        return self.leaves.seeded_rows(count, self.components, rng)

    def ess(self, s: np.ndarray) -> np.ndarray:
        return self.leaves.ess(s)

    def local_start(self, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
        """A group's start: its ML statistics by EM, which its peers compute together (``crc.nodes.vertical_peer``).
        A vertical group holds every training instance, so this is centralized RC's own start; not the one E-step
        of a horizontal circuit's peers (``MixtureCircuit.local_start``), whose few instances each would label
        their components apart."""
        return self.fit_ml(phi, y, mask=mask)

    def block_scores(self, theta: dict, phi: np.ndarray, b: int) -> np.ndarray:
        """log p_b(x_b | y, k) of shape (..., m, r K): what the peer holding block ``b`` contributes."""
        return self.leaves.block_scores(theta, phi, b)

    @property
    def parts(self) -> list[GenerativeModel]:
        """Each block's model over the (y, k) sub-classes: what the peer holding it keeps."""
        return self.leaves.parts

    def block_columns(self, b: int) -> slice:
        return self.leaves.block_columns(b)

    def block_statistics(self, s: np.ndarray, b: int) -> np.ndarray:
        return self.leaves.block_statistics(s, b)

    def join(self, block_stats: list[np.ndarray]) -> np.ndarray:
        return self.leaves.join(block_stats)


def block_model(kind: str, schema: Schema, blocks: list[list[int]], **options) -> GenerativeModel:
    """The model of a vertical or hybrid run of ``--model kind``: a block product for naive Bayes and QDA; for
    ``pc`` (the mixture structure) a latent mixture of naive-Bayes block products with its ``components``."""
    if kind == "pc":
        structure = options.pop("structure", "mixture")
        if structure != "mixture":
            raise CRCError(f"a vertical partition needs a circuit whose products split by feature block: the mixture "
                           f"structure, not {structure!r}")
        return BlockMixture("nb", schema, blocks, **options)
    return BlockProduct(kind, schema, blocks, **options)
