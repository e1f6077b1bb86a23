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

Both passes are vectorized over the repetitions and the batch axes: one
batched matrix product gives the channels of every leaf region; the sum
regions of one height, in every repetition, form one layer. Channels are kept
in linear space, scaled to a largest value of 1, with their log-scale apart, so
that a layer's products, its sums and, downward, its expected edge counts are
elementwise and batched matrix products, with no log-sum-exp per edge. Long
inputs are processed in blocks of instances and batch entries small enough to
stay in cache; the blocks run on ``crc.core.threads``' threads and are added up
in block order, so results do not depend on the thread count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from crc.core.errors import CRCError
from crc.core.models.base import GenerativeModel
from crc.core.models.circuit import EM_ITERATIONS, STRUCTURE_SEED, aligned_statistics, fit_em, seeded_leaves
from crc.core.models.layout import Layout
from crc.core.models.naive_bayes import NaiveBayes
from crc.core.models.options import Option
from crc.core.numeric import logsumexp, normalise_exp
from crc.core.schema import Schema
from crc.core.threads import ordered_map

DEPTH = Option("depth", int, 2, "Region-graph circuit: levels of random binary feature splits.", low=1, high=8)
REPETITIONS = Option("repetitions", int, 2, "Region-graph circuit: independent random splits mixed at the top.",
                     low=1, high=32)
SUMS = Option("sums", int, 2, "Region-graph circuit: sum nodes per region (and leaf channels per leaf region).",
              low=1, high=16)
BLOCK_ELEMENTS = 2**19
"""Working set of one pass over a block of instances (and batch entries), in array elements."""
BLOCK_INSTANCES = 128
"""Fewest instances in a block (when there are as many): shorter rows cost more in per-call overhead than they save."""


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


def _heights(regions: list[Region]) -> list[int]:
    """Height of every region of a tree (0 for a leaf, else one more than its higher child); children come first."""
    heights: list[int] = []
    for region in regions:
        heights.append(0 if region.children is None else 1 + max(heights[c] for c in region.children))
    return heights


def _run(indices: list[int]) -> np.ndarray | slice:
    """``indices`` as a slice when they are one ascending run (indexing then gives a view), else as an array."""
    if indices == list(range(indices[0], indices[0] + len(indices))):
        return slice(indices[0], indices[0] + len(indices))
    return np.array(indices, dtype=np.intp)


@dataclass(frozen=True)
class Level:
    """Inner sum regions of one height, evaluated together: their positions in the inner-region list (G),
    their value slots (a range of G) and the value slots of their left and right children (G; a slice when
    they are one run)."""

    inner: np.ndarray
    slots: slice
    left: np.ndarray | slice
    right: np.ndarray | slice


@dataclass(frozen=True)
class Plan:
    """Index arrays of the vectorized passes over all repetitions.

    Every non-top region has a value slot: the L leaf regions first, then the inner sum regions level by
    level. ``leaf_columns`` (L, c) are each leaf region's feature-map columns, padded to the
    longest with column 0 and ``leaf_valid`` (L, c) 1 on the real ones; ``natural_index`` (L, S, c) picks a
    leaf channel's natural parameters from a class's flattened (repetition, channel, column) block;
    ``leaf_order`` (T S w) reorders the leaves' flattened (L, S, c) moments into the layout's
    (repetition, channel, column) order. ``levels`` go bottom-up; ``top_left`` and ``top_right`` (T) are
    the slots of the top regions' children.
    """

    levels: tuple[Level, ...]
    top_left: np.ndarray | slice
    top_right: np.ndarray | slice
    leaf_columns: np.ndarray
    leaf_valid: np.ndarray
    natural_index: np.ndarray
    leaf_order: np.ndarray
    n_slots: int

    @property
    def n_leaves(self) -> int:
        return len(self.leaf_columns)


class Parameters(NamedTuple):
    """The parameters in the shapes of the passes, batch axes flattened to one (N): the leaf channels' natural
    parameters (N, L, r S, c), every level's sum weights (N, G, r, S, S^2), the top sums' weights
    (N, T, r, 1, S^2) and the class log-priors (N, r)."""

    leaves: np.ndarray
    levels: list[np.ndarray]
    top: np.ndarray
    log_prior: np.ndarray

    def block(self, nodes: slice) -> Parameters:
        return Parameters(self.leaves[nodes], [weights[nodes] for weights in self.levels], self.top[nodes],
                          self.log_prior[nodes])


class Layer(NamedTuple):
    """Sum nodes over the products of two child regions, for G regions: ``outer`` (N, G, r, S^2, m), the
    products' values divided by exp(``shift``) (N, G, r, 1, m); ``mass`` (N, G, r, S_out, m), the sums'
    values divided by the same factor (``weights @ outer``); ``weights`` (N, G, r, S_out, S^2)."""

    outer: np.ndarray
    shift: np.ndarray
    mass: np.ndarray
    weights: np.ndarray


class Upward(NamedTuple):
    """An upward pass: the channels' values of every slot, as ``scaled`` (N, slots, r, S, m), largest 1, times
    exp(``log_scale``) (N, slots, r, 1, m); the sum layer of every level, the top layer (one sum per
    repetition and class: S_out = 1), the top sums' log-values (N, T, r, 1, m) and log p(x | y) (N, r, 1, m)."""

    scaled: np.ndarray
    log_scale: np.ndarray
    levels: list[Layer]
    top: Layer
    log_top: np.ndarray
    log_marginal: np.ndarray


def _flat(array: np.ndarray, batch: tuple[int, ...], core: int) -> np.ndarray:
    """``array`` with its batch axes broadcast to ``batch`` and flattened into one: (N, *the last ``core`` axes)."""
    shape = array.shape[array.ndim - core:]
    return np.broadcast_to(array, batch + shape).reshape((-1,) + shape)


def _shared(array: np.ndarray, batch: tuple[int, ...], core: int) -> np.ndarray:
    """``_flat``, but an array without batch axes (or with only unit ones) stays one entry, (1, *core axes), shared
    by the whole batch: the test set's feature map is not copied for every node."""
    if np.prod(array.shape[:array.ndim - core], dtype=int) == 1:
        return array.reshape((1,) + array.shape[array.ndim - core:])
    return _flat(array, batch, core)


def _entries(array: np.ndarray, nodes: slice) -> np.ndarray:
    """The batch entries ``nodes`` of an array from ``_shared`` (all of it when it is shared)."""
    return array if len(array) == 1 else array[nodes]

class RegionGraphCircuit(GenerativeModel):
    kind = "pc"
    structure = "region-graph"
    OPTIONS = (DEPTH, REPETITIONS, SUMS, STRUCTURE_SEED)

    def __init__(self, schema: Schema, *, depth: int = DEPTH.default, repetitions: int = REPETITIONS.default,
                 sums: int = SUMS.default, structure_seed: int = STRUCTURE_SEED.default):
        if len(schema.features) < 2:
            # 'n_features=1' is what scikit-learn's check_fit2d_1feature looks for
            raise CRCError(f"a region-graph circuit needs at least two features, got n_features={len(schema.features)}: "
                           f"the mixture circuit (--structure mixture) or naive Bayes takes one")
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
        self._plan = self._make_plan()
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

    def _make_plan(self) -> Plan:
        """Slots, levels and leaf index arrays of this structure (a top region always has children:
        there are at least two features and one level of splits).

        Regions are numbered top-down, breadth first, the left children of a generation before its right
        children; slots follow that order (leaves first, then the sum regions by height). In a balanced
        tree a level's left children, and its right children, are then each one run of slots: a view of
        the values, not a gathered copy.
        """
        tops = [(t, len(regions) - 1) for t, regions in enumerate(self.trees)]
        heights = {(t, i): h for t, regions in enumerate(self.trees) for i, h in enumerate(_heights(regions))}
        order, parents = [], tops
        while parents:
            pairs = [self.trees[t][i].children for t, i in parents]
            generation = [(t, pair[side]) for side in (0, 1) for (t, _), pair in zip(parents, pairs)]
            order += generation
            parents = [key for key in generation if self.trees[key[0]][key[1]].children]
        leaves = [key for key in order if self.trees[key[0]][key[1]].children is None]
        position = {key: n for n, key in enumerate(self._inner)}
        inner = sorted((key for key in order if key in position), key=lambda key: heights[key])  # stable: BFS order kept
        slots = {key: n for n, key in enumerate(leaves + inner)}

        def children(keys: list[tuple[int, int]]) -> tuple[np.ndarray | slice, np.ndarray | slice]:
            pairs = [self.trees[t][i].children for t, i in keys]
            return tuple(_run([slots[(t, pair[side])] for (t, _), pair in zip(keys, pairs)]) for side in (0, 1))

        levels, start = [], len(leaves)
        for height in sorted({heights[key] for key in inner}):
            keys = [key for key in inner if heights[key] == height]
            levels.append(Level(np.array([position[key] for key in keys], dtype=np.intp),
                                slice(start, start + len(keys)), *children(keys)))
            start += len(keys)
        top_left, top_right = children(tops)
        return Plan(tuple(levels), top_left, top_right, *self._leaf_indices(leaves), n_slots=len(slots))

    def _leaf_indices(self, leaves: list[tuple[int, int]]) -> tuple[np.ndarray, ...]:
        """``leaf_columns``, ``leaf_valid``, ``natural_index`` and ``leaf_order`` of ``Plan`` for the leaf
        regions ``leaves`` given as (repetition, region index)."""
        columns = [self._region_columns(self.trees[t][i]) for t, i in leaves]
        width, sums = max(map(len, columns)), self.sums
        leaf_width = self.leaves.layout.n_columns - 1
        leaf_columns = np.zeros((len(leaves), width), dtype=np.intp)
        leaf_valid = np.zeros((len(leaves), width))
        natural_index = np.zeros((len(leaves), sums, width), dtype=np.intp)
        leaf_order = np.zeros(self.repetitions * sums * leaf_width, dtype=np.intp)
        for n, ((t, _), cols) in enumerate(zip(leaves, columns)):
            leaf_columns[n, :len(cols)] = cols
            leaf_valid[n, :len(cols)] = 1.0
            for s in range(sums):
                natural_index[n, s] = (t * sums + s) * (leaf_width + 1) + leaf_columns[n]
                leaf_order[(t * sums + s) * leaf_width + cols - 1] = (n * sums + s) * width + np.arange(len(cols))
        return leaf_columns, leaf_valid, natural_index, leaf_order

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

    def record_bound(self, clip: float) -> float:
        """Class row y of s({x}, u) is u_y times flows: the count (1); the class sum's edges, whose flows sum to 1
        (squares <= 1); per repetition t with flow f_t (sum_t f_t = 1), each of its inner regions' edges summing
        to f_t (squares <= f_t^2), and each feature's leaf channels summing to f_t (squares <= f_t^2 times that
        feature's phi columns). So ||row|| <= |u_y| sqrt(2 + max_t inner_t + ||phi||^2 - 1) (phi: the leaves'
        naive-Bayes map, whose constant column is the count)."""
        inner = max(sum(1 for t, _ in self._inner if t == tree) for tree in range(self.repetitions))
        return float(np.sqrt(1 + inner + self.leaves.record_bound(clip) ** 2))

    def _leaf_table(self, table: np.ndarray) -> np.ndarray:
        """Naive-Bayes statistics (..., size of the leaves) with the class count as every leaf row's count."""
        leaves = table[..., :, self.layout.columns("leaves")]
        leaves = leaves.reshape(leaves.shape[:-1] + (self.repetitions * self.sums, -1))  # (..., r, R S, width)
        count = np.broadcast_to(table[..., :, 0, None, None], leaves.shape[:-1] + (1,))
        merged = np.concatenate([count, leaves], axis=-1)
        return merged.reshape(merged.shape[:-3] + (-1,))

    def keep_variances(self, stats: np.ndarray, reference: np.ndarray, fraction: float) -> np.ndarray:
        """The circuits' leaf rule (``NaiveBayes.keep_leaves``) on every leaf: a Gaussian leaf's variance and a
        categorical leaf's counts at least ``fraction`` times the reference's; only the leaves' sums of squares and
        category counts change. Without it exact diffusion let leaf variances collapse: on ``texture`` (repeat 0,
        local start) peers diverged to 0.92 test error."""
        table = self.table(stats)
        kept = self.leaves.table(self.leaves.keep_leaves(self._leaf_table(table), self._leaf_table(self.table(reference)),
                                                         fraction))
        out = table.copy()
        out[..., :, self.layout.columns("leaves")] = kept[..., 1:].reshape(table.shape[:-1] + (-1,))
        return out.reshape(stats.shape)

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

    def _parameters(self, theta: dict, batch: tuple[int, ...]) -> Parameters:
        """``theta`` in the shapes of the passes, broadcast to the batch shape ``batch``."""
        plan, sums = self._plan, self.sums
        natural = theta["natural"]  # (..., r, T, S, k)
        flat = natural.reshape(natural.shape[:-3] + (-1,))
        leaves = np.take(flat, plan.natural_index, axis=-1) * plan.leaf_valid[:, None, :]  # (..., r, L, S, c)
        leaves = np.moveaxis(leaves, -4, -3)  # (..., L, r, S, c)
        leaves = leaves.reshape(leaves.shape[:-3] + (-1, leaves.shape[-1]))
        inner = np.exp(np.moveaxis(theta["log_inner"], -4, -3))  # (..., inner, r, S, S^2)
        log_top = theta["log_top"].reshape(theta["log_top"].shape[:-1] + (self.repetitions, 1, sums ** 2))
        return Parameters(_flat(leaves, batch, 3), [_flat(inner[..., level.inner, :, :, :], batch, 4) for level in plan.levels],
                          _flat(np.exp(np.moveaxis(log_top, -4, -3)), batch, 4), _flat(theta["log_prior"], batch, 1))

    def _blocks(self, batch: int, m: int):
        """(batch entries, instances) slices of blocks within BLOCK_ELEMENTS that cover a flattened batch of
        ``batch`` and ``m`` instances: as many instances as fit (long contiguous rows), then batch entries."""
        plan, sums = self._plan, self.sums
        layers = (sums ** 2 + sums) * sum(len(level.inner) for level in plan.levels) + (sums ** 2 + 1) * self.repetitions
        per_instance = self.n_classes * max(2 * sums * plan.n_slots + layers, sums * plan.leaf_columns.shape[1])
        instances = max(1, min(m, max(BLOCK_INSTANCES, BLOCK_ELEMENTS // per_instance)))
        nodes = max(1, BLOCK_ELEMENTS // (per_instance * instances))
        for first in range(0, batch, nodes):
            for start in range(0, m, instances):
                yield slice(first, first + nodes), slice(start, start + instances)

    def _prepare(self, theta: dict, phi: np.ndarray, *arrays: np.ndarray) -> tuple[tuple[int, ...], Parameters, np.ndarray]:
        """The batch shape of ``theta``, ``phi`` (..., m, k) and ``arrays`` (..., m, any), the parameters flattened
        over it and phi (N or 1, m, k) (``_shared``)."""
        batch = np.broadcast_shapes(theta["log_prior"].shape[:-1], phi.shape[:-2], *(a.shape[:-2] for a in arrays))
        return batch, self._parameters(theta, batch), _shared(phi, batch, 2)

    def _passes(self, parameters: Parameters, phi: np.ndarray, work):
        """``work(nodes, instances, parameters, inputs, upward)`` for every block of phi (N or 1, m, k) — its batch
        entries, instances, their parameters, leaf inputs and upward pass — on ``crc.core.threads``' threads;
        the results in block order."""

        def one(where: tuple[slice, slice]):
            nodes, instances = where
            block, inputs = parameters.block(nodes), self._leaf_inputs(_entries(phi, nodes)[:, instances])
            return work(nodes, instances, block, inputs, self._upward(block, inputs))

        return ordered_map(one, self._blocks(len(parameters.log_prior), phi.shape[1]))

    def _leaf_inputs(self, phi: np.ndarray) -> np.ndarray:
        """Every leaf region's feature-map columns (padded), (N, L, m, c), from phi (N, m, k)."""
        return np.moveaxis(np.take(phi, self._plan.leaf_columns, axis=-1), -3, -2)

    @staticmethod
    def _layer(scaled: np.ndarray, log_scale: np.ndarray, left: np.ndarray | slice, right: np.ndarray | slice,
               weights: np.ndarray) -> Layer:
        """The sum layer with weights (N, G, r, S_out, S^2) over the products of slots ``left`` and ``right`` (G).

        Products are taken in linear space, of the children's scaled channels, so that the log-sum-exp of the
        weighted products is one batched matrix product, without an (S_out, S^2) array per instance.
        """
        a, b = scaled[:, left], scaled[:, right]  # (N, G, r, S, m)
        outer = np.multiply(a[..., :, None, :], b[..., None, :, :])
        outer = outer.reshape(outer.shape[:-3] + (-1, outer.shape[-1]))
        return Layer(outer, log_scale[:, left] + log_scale[:, right], np.matmul(weights, outer), weights)

    def _upward(self, parameters: Parameters, inputs: np.ndarray) -> Upward:
        """The upward pass over leaf inputs (N or 1, L, m, c): every leaf in one batched product, then the sum
        regions of all repetitions height by height, then the tops."""
        plan = self._plan
        shape = parameters.leaves.shape[:1] + (plan.n_slots, self.n_classes, self.sums, inputs.shape[-2])
        scaled, log_scale = np.empty(shape), np.empty(shape[:-2] + (1,) + shape[-1:])
        leaves, leaf_scale = scaled[:, :plan.n_leaves], log_scale[:, :plan.n_leaves]
        np.matmul(parameters.leaves, np.swapaxes(inputs, -1, -2), out=leaves.reshape(leaves.shape[:2] + (-1, shape[-1])))
        np.max(leaves, axis=-2, keepdims=True, out=leaf_scale)
        leaves -= leaf_scale
        np.exp(leaves, out=leaves)
        levels = []
        for level, weights in zip(plan.levels, parameters.levels):
            layer = self._layer(scaled, log_scale, level.left, level.right, weights)
            scale = np.max(layer.mass, axis=-2, keepdims=True, out=log_scale[:, level.slots])
            np.divide(layer.mass, scale, out=scaled[:, level.slots])
            np.log(scale, out=scale)
            scale += layer.shift
            levels.append(layer)
        top = self._layer(scaled, log_scale, plan.top_left, plan.top_right, parameters.top)  # mass (N, T, r, 1, m)
        log_top = np.log(top.mass) + top.shift
        return Upward(scaled, log_scale, levels, top, log_top, logsumexp(log_top, axis=-4))

    def _log_joint(self, parameters: Parameters, upward: Upward) -> np.ndarray:
        """log p(x, y) (N, m, r) of an upward pass."""
        return np.swapaxes(parameters.log_prior[..., None] + upward.log_marginal[..., 0, :], -1, -2)

    def log_joint(self, theta: dict, phi: np.ndarray) -> np.ndarray:
        batch, parameters, phi = self._prepare(theta, phi)
        out = np.empty((len(parameters.log_prior), phi.shape[1], self.n_classes))

        def fill(nodes, instances, block, _, upward):
            out[nodes, instances] = self._log_joint(block, upward)

        self._passes(parameters, phi, fill)
        return out.reshape(batch + out.shape[1:])

    def _down(self, layer: Layer, flow: np.ndarray, flows: np.ndarray, left: np.ndarray | slice,
              right: np.ndarray | slice) -> np.ndarray:
        """Send the flow (N, G, r, S_out, m) of a sum layer through its edges on to the channels of slots
        ``left`` and ``right`` in ``flows``; return the edges' expected counts (N, G, r, S_out, S^2)."""
        per_mass = flow / layer.mass
        counts = layer.weights * np.matmul(per_mass, np.swapaxes(layer.outer, -1, -2))
        products = layer.outer * np.matmul(np.swapaxes(layer.weights, -1, -2), per_mass)  # (N, G, r, S^2, m)
        grid = products.reshape(products.shape[:-2] + (self.sums, self.sums) + products.shape[-1:])
        flows[:, left] = grid.sum(axis=-2)
        flows[:, right] = grid.sum(axis=-3)
        return counts

    def _table(self, inputs: np.ndarray, upward: Upward, weights: np.ndarray) -> np.ndarray:
        """``s(X, W; theta)`` as a table (N, r, columns): the downward pass of the class weights (N, m, r)."""
        plan, top = self._plan, upward.top
        top_flow = np.swapaxes(weights, -1, -2)[:, None, :, None, :] * np.exp(
            upward.log_top - upward.log_marginal[:, None])  # (N, T, r, 1, m)
        flows = np.empty_like(upward.scaled)
        top_counts = self._down(top, top_flow, flows, plan.top_left, plan.top_right)  # (N, T, r, 1, S^2)
        inner = np.empty(flows.shape[:1] + (len(self._inner), self.n_classes, self.sums, self.sums ** 2))
        for level, layer in zip(reversed(plan.levels), reversed(upward.levels)):
            inner[:, level.inner] = self._down(layer, flows[:, level.slots], flows, level.left, level.right)
        parts = [weights.sum(axis=-2)[..., None], np.moveaxis(top_counts, 1, 2), np.moveaxis(inner, 1, 2),
                 self._leaf_moments(flows[:, :plan.n_leaves], inputs)]
        return np.concatenate([part.reshape(part.shape[:2] + (-1,)) for part in parts], axis=-1)

    def _leaf_moments(self, flows: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        """The leaves' statistics (N, r, T S w) from their channels' flows (N, L, r, S, m): one batched product."""
        moments = np.matmul(flows.reshape(flows.shape[:2] + (-1, flows.shape[-1])), inputs)  # (N, L, r S, c)
        moments = np.moveaxis(moments.reshape(flows.shape[:-1] + moments.shape[-1:]), 1, 2)  # (N, r, L, S, c)
        return np.take(moments.reshape(moments.shape[:2] + (-1,)), self._plan.leaf_order, axis=-1)

    def labelled(self, theta: dict, phi: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``s(X, W; theta)``: expected flows of the class weights (..., m, r) through every edge and leaf."""
        return self._expected_counts(theta, phi, weights)

    def residual_and_posteriors(self, theta: dict, phi: np.ndarray, weights: np.ndarray,
                                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As ``GenerativeModel.residual_and_posteriors``, with one upward pass for P and the flows."""
        return self._expected_counts(theta, phi, weights, mask, minus_posteriors=True)

    def _expected_counts(self, theta: dict, phi: np.ndarray, weights: np.ndarray, mask: np.ndarray | None = None, *,
                         minus_posteriors: bool = False):
        """``s(X, W; theta)`` (..., size); with ``minus_posteriors``, ``(s(X, W - P; theta), P)`` with the posteriors
        P (..., m, r) multiplied by ``mask`` (..., m) in the first."""
        batch, parameters, phi = self._prepare(theta, phi, weights)
        weights = _flat(weights, batch, 2)
        mask = None if mask is None else _flat(mask[..., None], batch, 2)
        table = np.zeros((len(parameters.log_prior), self.n_classes, self.layout.n_columns))
        posteriors = np.empty(weights.shape) if minus_posteriors else None

        def expected(nodes, instances, block, inputs, upward):
            flow = weights[nodes, instances]
            if minus_posteriors:
                block_posteriors = normalise_exp(np.ascontiguousarray(self._log_joint(block, upward)), axis=-1)
                posteriors[nodes, instances] = block_posteriors
                flow = flow - (block_posteriors if mask is None else block_posteriors * mask[nodes, instances])
            # Weighted by the constant feature, as in every model's statistics: a zero row (padding) adds nothing.
            return nodes, self._table(inputs, upward, flow * _entries(phi, nodes)[:, instances, 0, None])

        for nodes, part in self._passes(parameters, phi, expected):  # added in block order, whatever the threads
            table[nodes] += part
        table = table.reshape(batch + (self.size,))
        return (table, posteriors.reshape(batch + posteriors.shape[1:])) if minus_posteriors else table

    def local_start(self, phi: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None) -> np.ndarray:
        return aligned_statistics(self, phi, y, mask=mask)

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
