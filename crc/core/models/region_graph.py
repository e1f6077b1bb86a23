"""Random region-graph circuits (in the style of RAT-SPNs) as class-conditionals.

Structure, built deterministically from the structure seed (so every peer
builds the same circuit): ``repetitions`` random binary splits of the features
to ``depth`` levels. A leaf region holds ``sums`` channels, each a product of
univariate leaves (Gaussian or categorical) over the region's features; an
inner region holds ``sums`` sum nodes over the products of its two children's
channels; the top region of a repetition is a product layer, and one sum node
per class mixes the top products of every repetition. The circuit is smooth
and decomposable.

Statistics, per class row: ``count`` (1), the class sum node's edge counts,
every inner sum node's edge counts, and for every (repetition, channel) the
naive-Bayes moments and category counts of its leaves. ``s(X, W; theta)``
runs the E-step: an upward pass gives every node's log-value, a downward pass
the expected flow through every edge and leaf. ``theta(s)`` normalises edge
counts (with the count floor) and takes the leaves' closed form from naive
Bayes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.models.circuit import EM_ITERATIONS, STRUCTURE_SEED, fit_em, seeded_leaves
from crc.core.models.layout import Layout
from crc.core.models.naive_bayes import NaiveBayes
from crc.core.models.options import Option
from crc.core.numeric import logsumexp, normalise_exp
from crc.core.schema import Schema

DEPTH = Option("depth", int, 2, "Region-graph circuit: levels of random binary feature splits.", low=1, high=8)
REPETITIONS = Option("repetitions", int, 2, "Region-graph circuit: independent random splits mixed at the top.",
                     low=1, high=32)
SUMS = Option("sums", int, 2, "Region-graph circuit: sum nodes per region (and leaf channels per leaf region).",
              low=1, high=16)


@dataclass(frozen=True)
class Region:
    features: tuple[int, ...]
    children: tuple[int, int] | None  # indices into the repetition's region list; None for a leaf


def _split(features: np.ndarray, depth: int, regions: list[Region]) -> int:
    """Append the region tree over ``features`` (children first); return the index of its top region."""
    if depth == 0 or len(features) < 2:
        regions.append(Region(tuple(int(f) for f in features), None))
        return len(regions) - 1
    half = len(features) // 2
    left = _split(features[:half], depth - 1, regions)
    right = _split(features[half:], depth - 1, regions)
    regions.append(Region(tuple(int(f) for f in features), (left, right)))
    return len(regions) - 1


class RegionGraphCircuit(GenerativeModel):
    kind = "pc"
    structure = "region-graph"
    OPTIONS = (DEPTH, REPETITIONS, SUMS, STRUCTURE_SEED)

    def __init__(self, schema: Schema, *, depth: int = DEPTH.default, repetitions: int = REPETITIONS.default,
                 sums: int = SUMS.default, structure_seed: int = STRUCTURE_SEED.default):
        if len(schema.features) < 2:
            raise CRCError("a region-graph circuit needs at least two features")
        self.depth, self.repetitions, self.sums = DEPTH.check(depth), REPETITIONS.check(repetitions), SUMS.check(sums)
        self.structure_seed = STRUCTURE_SEED.check(structure_seed)
        rng = np.random.default_rng(structure_seed)
        self.trees = []
        for _ in range(repetitions):
            regions: list[Region] = []
            _split(rng.permutation(len(schema.features)), depth, regions)
            self.trees.append(regions)
        leaf_classes = tuple(f"{c}\x1f{t}\x1f{i}" for c in schema.classes for t in range(repetitions) for i in range(sums))
        self.leaves = NaiveBayes(replace(schema, classes=leaf_classes))
        self._feature_columns = self._columns_of_features(schema)
        # (repetition, region index) of every inner sum region: not a leaf, not a repetition's top.
        self._inner = [(t, i) for t, regions in enumerate(self.trees) for i, region in enumerate(regions[:-1]) if region.children]
        self._inner_index = {key: n for n, key in enumerate(self._inner)}
        super().__init__(schema)

    def _columns_of_features(self, schema: Schema) -> list[np.ndarray]:
        """The columns of the naive-Bayes feature map that belong to each feature (the constant column excluded)."""
        dc = len(self.leaves.continuous)
        categorical = self.leaves.categorical
        columns = []
        for j in range(len(schema.features)):
            if j in self.leaves.continuous:
                p = self.leaves.continuous.index(j)
                columns.append(np.array([1 + p, 1 + dc + p, 1 + 2 * dc + p]))
            else:
                q = categorical.columns.index(j)
                start = 1 + 3 * dc + int(categorical.offsets[q])
                columns.append(np.arange(start, start + int(categorical.sizes[q])))
        return columns

    def _region_columns(self, region: Region) -> np.ndarray:
        return np.concatenate([self._feature_columns[j] for j in region.features])

    def _top_width(self, t: int) -> int:
        return self.sums * self.sums if self.trees[t][-1].children else self.sums

    def _layout(self) -> Layout:
        top = sum(self._top_width(t) for t in range(self.repetitions))
        leaf_width = self.leaves.layout.n_columns - 1
        return Layout(self.n_classes, (("count", 1), ("top", top), ("inner", len(self._inner) * self.sums ** 3),
                                       ("leaves", self.repetitions * self.sums * leaf_width)))

    def _structure_digest(self) -> str:
        return f"region-graph:{self.depth}:{self.repetitions}:{self.sums}:{self.structure_seed}"

    @property
    def options(self) -> dict:
        return {"structure": self.structure, **super().options}

    def features(self, x: np.ndarray) -> np.ndarray:
        return self.leaves.features(x)

    def _leaf_table(self, table: np.ndarray) -> np.ndarray:
        """Naive-Bayes statistics (..., size of the leaves) with the class count as every leaf row's count."""
        leaves = table[..., :, self.layout.columns("leaves")]
        leaves = leaves.reshape(leaves.shape[:-1] + (self.repetitions * self.sums, -1))  # (..., r, R S, width)
        count = np.broadcast_to(table[..., :, 0, None, None], leaves.shape[:-1] + (1,))
        merged = np.concatenate([count, leaves], axis=-1)
        return merged.reshape(merged.shape[:-3] + (-1,))

    def theta(self, s: np.ndarray) -> dict:
        table = self.table(s)
        floor = self._floor(table)
        counts = np.maximum(table[..., :, 0], floor[..., 0])
        top = np.maximum(table[..., :, self.layout.columns("top")], floor)
        inner = np.maximum(table[..., :, self.layout.columns("inner")], floor)
        inner = inner.reshape(inner.shape[:-1] + (len(self._inner), self.sums, self.sums ** 2))
        leaf_theta = self.leaves.theta(self._leaf_table(table))
        natural = self.leaves.natural(leaf_theta)
        return {
            "log_prior": np.log(counts) - np.log(counts.sum(axis=-1, keepdims=True)),
            "log_top": np.log(top) - np.log(top.sum(axis=-1, keepdims=True)),
            "log_inner": np.log(inner) - np.log(inner.sum(axis=-1, keepdims=True)),
            "natural": natural.reshape(natural.shape[:-2] + (self.n_classes, self.repetitions, self.sums, -1)),
        }

    def _upward(self, theta: dict, phi: np.ndarray):
        """The products under every inner sum region by (repetition, region), (..., m, r, S^2), and the top
        products of all repetitions, (..., m, r, sum of top widths); all log-values."""
        products_below, tops = {}, []
        for t, regions in enumerate(self.trees):
            rep_values = []
            for i, region in enumerate(regions):
                if region.children is None:
                    cols = self._region_columns(region)
                    eta = theta["natural"][..., :, t, :, :][..., cols]  # (..., r, S, c)
                    flat = eta.reshape(eta.shape[:-3] + (-1, eta.shape[-1]))  # (..., r S, c): one matrix product
                    scores = np.matmul(phi[..., cols], np.swapaxes(flat, -1, -2))
                    rep_values.append(scores.reshape(scores.shape[:-1] + (self.n_classes, self.sums)))
                    continue
                a, b = (rep_values[c] for c in region.children)
                products = (a[..., :, None] + b[..., None, :]).reshape(a.shape[:-1] + (-1,))
                if i == len(regions) - 1:
                    rep_values.append(products)
                else:
                    products_below[(t, i)] = products
                    log_w = theta["log_inner"][..., :, self._inner_index[(t, i)], :, :]  # (..., r, S, S^2)
                    rep_values.append(logsumexp(log_w[..., None, :, :, :] + products[..., None, :]))
            tops.append(rep_values[-1])
        return products_below, np.concatenate(tops, axis=-1)

    def log_joint(self, theta: dict, phi: np.ndarray) -> np.ndarray:
        _, tops = self._upward(theta, phi)
        return theta["log_prior"][..., None, :] + logsumexp(theta["log_top"][..., None, :, :] + tops)

    def labelled(self, theta: dict, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``s(X, W; theta)``: expected flows of the class weights (..., m, r) through every edge and leaf."""
        products_below, tops = self._upward(theta, phi)
        table_parts = {"count": weights.sum(axis=-2)[..., None]}
        top_flow = weights[..., None] * normalise_exp(theta["log_top"][..., None, :, :] + tops)
        table_parts["top"] = top_flow.sum(axis=-3)
        inner_counts = [None] * len(self._inner)
        leaf_stats = np.zeros(weights.shape[:-2] + (self.n_classes, self.repetitions, self.sums, self.leaves.layout.n_columns - 1))
        start = 0
        for t, regions in enumerate(self.trees):
            width = self._top_width(t)
            flows = {len(regions) - 1: top_flow[..., start:start + width]}
            start += width
            for i in range(len(regions) - 1, -1, -1):
                region, flow = regions[i], flows.pop(i)
                if region.children is None:
                    cols = self._region_columns(region)
                    block = leaf_stats[..., :, t, :, :]  # a view; the column index below stays in place
                    flat = flow.reshape(flow.shape[:-2] + (-1,))  # (..., m, r S)
                    moments = np.matmul(np.swapaxes(flat, -1, -2), phi[..., cols])  # (..., r S, c)
                    block[..., cols - 1] += moments.reshape(moments.shape[:-2] + (self.n_classes, self.sums, -1))
                    continue
                a, b = region.children
                if i != len(regions) - 1:  # a sum layer: split each sum's flow over its products
                    log_w = theta["log_inner"][..., :, self._inner_index[(t, i)], :, :]
                    edge = flow[..., None] * normalise_exp(log_w[..., None, :, :, :] + products_below[(t, i)][..., None, :])
                    inner_counts[self._inner_index[(t, i)]] = edge.sum(axis=-4)
                    flow = edge.sum(axis=-2)
                grid = flow.reshape(flow.shape[:-1] + (self.sums, self.sums))
                flows[a], flows[b] = grid.sum(axis=-1), grid.sum(axis=-2)
        table_parts["inner"] = (np.stack(inner_counts, axis=-3).reshape(weights.shape[:-2] + (self.n_classes, -1))
                                if inner_counts else np.zeros(weights.shape[:-2] + (self.n_classes, 0)))
        table_parts["leaves"] = leaf_stats.reshape(weights.shape[:-2] + (self.n_classes, -1))
        table = np.concatenate([table_parts[name] for name in ("count", "top", "inner", "leaves")], axis=-1)
        return table.reshape(table.shape[:-2] + (self.size,))

    def fit_ml(self, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None,
               iterations: int = EM_ITERATIONS) -> np.ndarray:
        return fit_em(self, phi, y, mask=mask, iterations=iterations)

    def uniform(self, m0: float) -> np.ndarray:
        """ESS ``m0``; every class the same circuit (uniform posterior), uniform sum weights, seeded leaves."""
        per_class = m0 / self.n_classes
        leaves = seeded_leaves(self.leaves, per_class, self.repetitions * self.sums,
                               np.random.default_rng(self.structure_seed + 1))
        top = [np.full(self._top_width(t), per_class / sum(map(self._top_width, range(self.repetitions))))
               for t in range(self.repetitions)]
        inner = np.full(len(self._inner) * self.sums ** 3, per_class / self.sums ** 2)
        row = np.concatenate([[per_class], *top, inner, leaves.reshape(-1)])
        return np.tile(row, self.n_classes)
