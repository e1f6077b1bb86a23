"""The classifier of a vertical group from its peers' model files: each file holds one block's statistics (a model of
that block's features), and the group's classifier is their class-conditional product,

    log p(x, y) = log p(y) + sum_b log p_b(x_b | y)        (a mixture of block products: per (y, k), then summed over k)

as ``crc.core.models.blocks`` defines it and a group learns it (``crc.nodes.vertical_peer``).
"""

from __future__ import annotations

import numpy as np

from crc.core.errors import CRCError
from crc.core.feature_partition import parse_feature_partition
from crc.core.model_file import TrainedModel, load_model
from crc.core.numeric import logsumexp, normalise_exp


def check_group(blocks: list[TrainedModel], sources: list[str]) -> None:
    """A CRCError unless ``blocks`` (read from ``sources``) are the block models of one group: each written by a
    group's peer, distinct blocks with disjoint features, the same model, options, classes and partition, and every
    block of that partition."""
    first = blocks[0]
    seen: dict[int, str] = {}
    features: dict[str, str] = {}
    for trained, source in zip(blocks, sources):
        block = trained.group_block
        if block is None:
            raise CRCError(f"{source}: not a block of a vertical or hybrid group (its metrics name no partition and "
                           "block): give only the model files of one group's peers")
        if block in seen:
            raise CRCError(f"{source} and {seen[block]} both hold block {block}: give one model file per block")
        seen[block] = source
        if (trained.kind, trained.model_options) != (first.kind, first.model_options):
            raise CRCError(f"{source}: model {trained.kind} {trained.model_options}, {sources[0]}: {first.kind} "
                           f"{first.model_options}: the blocks of a group share their model")
        if tuple(trained.schema.classes) != tuple(first.schema.classes) or trained.schema.label != first.schema.label:
            raise CRCError(f"{source}: classes differ from {sources[0]}'s: the blocks of a group share the label")
        for name in trained.schema.feature_names:
            if name in features:
                raise CRCError(f"feature {name!r} is in {features[name]} and in {source}: a group's blocks are disjoint")
            features[name] = source
        if trained.metrics["partition"] != first.metrics["partition"]:
            raise CRCError(f"{source}: block {block} of a {trained.metrics['partition']} partition, {sources[0]}: of "
                           f"{first.metrics['partition']}: give the model files of one group's peers")
    try:
        partition = parse_feature_partition(first.metrics["partition"])
    except CRCError as exc:
        raise CRCError(f"{sources[0]}: {exc}") from None
    missing = [block for block in range(partition.blocks) if block not in seen]
    if missing or len(seen) != partition.blocks:
        what = f"no model file of block {missing[0]}" if missing else f"{len(seen)} blocks"
        raise CRCError(f"{what} of the {partition.spec} group: give every block's model file, one each")


def group_posteriors(blocks: list[TrainedModel], columns, *, source: str = "data") -> np.ndarray:
    """Class probabilities (m, r) of the group whose block models are ``blocks`` (checked with ``check_group``), on
    ``columns`` (``{feature name: [raw cell, ...]}``, every block's features). The class log-prior is the first
    block's (every block keeps the same class counts)."""
    total = None
    for trained in blocks:
        leaves = getattr(trained.model, "leaves", trained.model)  # a mixture's blocks are models of its (y, k)
        phi = trained.features(columns, source=source)
        scores = leaves.log_joint(trained.theta, phi) - trained.theta["log_prior"][None, :]
        total = scores if total is None else total + scores
    total = total + blocks[0].theta["log_prior"][None, :]
    classes = len(blocks[0].schema.classes)
    return normalise_exp(logsumexp(total.reshape(len(total), classes, -1)), axis=-1)


class GroupModel:
    """The classifier of a vertical group: its block models (``TrainedModel``, in block order), checked as one group's
    (``check_group``). ``classes`` are the label strings, as a ``TrainedModel``'s."""

    def __init__(self, blocks: list[TrainedModel], sources: list[str]):
        check_group(blocks, sources)
        order = sorted(range(len(blocks)), key=lambda i: blocks[i].group_block)
        self.blocks = [blocks[i] for i in order]
        self.classes = self.blocks[0].classes

    def predict_proba(self, columns, *, source: str = "data") -> np.ndarray:
        """Class probabilities (m, n_classes) of ``columns`` (``{feature name: [raw cell, ...]}`` or a DataFrame with
        every block's features; extra columns ignored)."""
        return group_posteriors(self.blocks, columns, source=source)

    def predict(self, columns, *, source: str = "data") -> np.ndarray:
        """Predicted class labels (m,) as strings."""
        return self.classes[self.predict_proba(columns, source=source).argmax(axis=1)]


def load_group(paths) -> GroupModel:
    """The classifier of a vertical group from every block's model file (``crc node`` writes one per peer; any
    order); a CRCError naming the file for a file that is not one of the same group's blocks."""
    paths = [str(path) for path in paths]
    if not paths:
        raise CRCError("load_group needs the model file of every block of the group")
    return GroupModel([load_model(path) for path in paths], paths)
