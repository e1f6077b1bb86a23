"""One ``crc node --partition vertical:K`` (or ``hybrid:GxK``) process: a peer of a group holding one block of
features, its options checked, its block's data loaded, run until its model file is written (``crc.nodes.node``
dispatches here).

What a peer of a group is told: the whole schema (``--schema``) and the blocks file (``--blocks``, every block's
feature names: together they fix the block model and its schema id, the same on every peer), the block it holds
(``--block``), the column of instance ids (``--id-column``) and the other members (``--peers``). Its ``--data`` has
the id column and the block's feature columns; the label holder's also has the label column, which is how a peer
knows its role. A hybrid partition's peer is also told the peers holding its block in the neighbouring groups
(``--block-peers``) and the ESS (``--ess``), the same on every peer.
"""

from __future__ import annotations

import logging

from crc.core.data import encode
from crc.core.errors import CRCError, OptionConflict, named_errors
from crc.core.feature_partition import blocks_from_names, parse_feature_partition, read_blocks_file
from crc.core.model_file import TrainedModel
from crc.core.models import ModelTooLarge, model_options
from crc.core.models.blocks import block_model
from crc.core.schema import Schema
from crc.nodes.alignment import check_ids
from crc.nodes.block_steps import BlockSteps
from crc.nodes.group_member import GroupMember
from crc.nodes.keys import PeerKeys
from crc.nodes.label_holder import LabelHolder
from crc.nodes.local_data import feature_map
from crc.nodes.node import NodeOptions, NodeOutcome
from crc.nodes.score_masks import ScoreMasks
from crc.nodes.settings import PeerSettings, check_masking_run
from crc.nodes.transport import Transport
from crc.nodes.vertical_peer import BlockData, GroupStopped, VerticalPeer
from crc.protocol.rules import check_secure_aggregation
from crc.tables.reader import read_csv

NOT_VERTICAL = {
    "aggregate": "--aggregate", "attack": "--attack", "dp_epsilon": "--dp-epsilon", "neighbourhoods": "--neighbourhoods",
    "loss": "--loss", "start_at": "--start-at", "via": "--via",
    "momentum": "--momentum", "start": "--start", "safeguard": "--safeguard", "classifier": "--classifier",
    "exact_diffusion": "--exact-diffusion", "algorithm": "--algorithm", "dp_colluders": "--colluders",
}
"""The options of a horizontal peer that a vertical group's peer does not take, by NodeOptions field."""


def _refuse_horizontal_options(options: NodeOptions, spec: str) -> None:
    defaults = NodeOptions(bind="", data="", schema="", out="")
    given = [flag for name, flag in NOT_VERTICAL.items() if getattr(options, name) != getattr(defaults, name)]
    if options.iters not in (None, 1):
        given.append("--iters")
    if given:
        raise OptionConflict(f"{given[0]}: not with --partition {spec}: a group of block peers runs RC of the block "
                             "model, one plain step a round")


class VerticalNode:
    """A vertical group's peer process ready to run: options checked, data loaded, checkpoint read. ``stop`` (a
    threading.Event) ends a run within a poll slice, after its checkpoint is written."""

    def __init__(self, options: NodeOptions, structure: dict, partition: str, peer: VerticalPeer, keys: PeerKeys | None):
        self.options, self.structure, self.partition, self.peer, self.keys = options, structure, partition, peer, keys

    @property
    def stop(self):
        return self.peer.stop

    def run(self) -> NodeOutcome:
        """Run the group's remaining passes over ZeroMQ; write the model file if they were all done. A peer of the
        group that stayed silent ends the run with ``group_stopped``."""
        peer, settings = self.peer, self.peer.settings
        neighbours = () if peer.gossip is None else peer.gossip.neighbours
        largest = max(peer.expect.max_frame_bytes, 0 if peer.gossip is None else peer.gossip.expect.max_frame_bytes)
        transport = Transport(settings.bind, [*settings.peers, *neighbours], max_frame_bytes=largest,
                              queue_messages=settings.queue_messages, poll_slice_s=settings.poll_slice_s, keys=self.keys)
        stopped = None
        try:
            finished = peer.run(transport)  # closes the transport
        except GroupStopped as exc:
            finished, stopped = False, str(exc)
        rejected = sum(peer.metrics.rejected.values())
        if finished:
            self._write_model()
            kept = ("the last statistics (a hybrid group keeps no best iterate)" if peer.chosen_iterate is None
                    else f"best iterate {peer.chosen_iterate}")
            peer.log.info("done after %s: %s, %d rejected; model of block %d written to %s", peer.reached(peer.pass_),
                          kept, rejected, peer.block, self.options.out)
        return NodeOutcome(finished=finished, alone=False, rounds_done=peer.pass_ or 0, neighbours=len(settings.peers),
                           rejected=rejected, group_stopped=stopped)

    def _write_model(self) -> None:
        """The block's best statistics as a model of the block's features, with the peer's place in the group."""
        peer, settings = self.peer, self.peer.settings
        holder = settings.bind if isinstance(peer, LabelHolder) else peer.holder
        metrics = {**peer.metrics.to_json(), "bind": settings.bind, "peers": list(settings.peers), "role": peer.role,
                   "partition": self.partition, "block": peer.block, "label_holder": holder, "ess": peer.ess,
                   "rows": len(peer.data.ids), "secure_aggregation": peer.masks is not None}
        if peer.chosen_iterate is not None:
            metrics["best_iterate"] = peer.chosen_iterate
        if peer.gossip is not None:
            metrics["block_peers"] = list(peer.gossip.neighbours)
        TrainedModel(peer.steps.schema, self.options.model, peer.best, metrics, **self.structure).save(self.options.out)


def prepare_vertical(options: NodeOptions, keys: PeerKeys | None, log: logging.Logger) -> VerticalNode:
    """Check a vertical group's peer's ``options`` (its addresses and keys are checked already) and build it; a
    CRCError (OptionConflict for options that cannot go together) names the first problem. Nothing touches the
    network."""
    partition = parse_feature_partition(options.partition)
    hybrid = partition.kind == "hybrid"
    _refuse_horizontal_options(options, partition.spec)
    if hybrid and options.ess is None:
        raise OptionConflict(f"--partition {partition.spec} needs --ess, the same on every peer (m / (lr x {partition.groups}) "
                             "for m training instances in all)")
    if options.block_peers and not hybrid:
        raise OptionConflict("--block-peers is for a peer of a hybrid partition (its block's peers in the other groups)")
    if options.secure_aggregation:
        check_secure_aggregation(secure_aggregation=True, aggregate=options.aggregate, encrypted_transport=keys is not None)
        if hybrid or partition.blocks < 3:
            raise OptionConflict(f"--secure-aggregation: not with --partition {partition.spec}: the label holder learns "
                                 "only the sum of its members' scores, which needs a vertical group of three peers or more")
        check_masking_run(options.run, options.checkpoint)
    if options.blocks is None or options.block is None:
        raise OptionConflict(f"--partition {partition.spec} needs --blocks FILE (every block's feature names, the same "
                             "file on every peer; `crc split` writes blocks.json) and --block B (the one this peer holds)")
    shared = Schema.load(options.schema)
    if options.label is not None and options.label != shared.label:
        raise CRCError(f"--label {options.label!r} differs from the schema's label {shared.label!r}")
    names = read_blocks_file(options.blocks)
    blocks = blocks_from_names([list(block) for block in names], shared.feature_names, options.blocks)
    if len(blocks) != partition.blocks:
        raise CRCError(f"{options.blocks} lists {len(blocks)} blocks, --partition {partition.spec} has {partition.blocks}")
    if not 0 <= options.block < partition.blocks:
        raise CRCError(f"--block {options.block}: a vertical:{partition.blocks} group has blocks 0 to {partition.blocks - 1}")
    if len(options.peers) != partition.blocks - 1:
        raise CRCError(f"--peers lists {len(options.peers)} address(es): the other members of a group of "
                       f"{partition.spec} are {partition.blocks - 1}")
    if len(options.block_peers) >= partition.groups:
        raise CRCError(f"--block-peers lists {len(options.block_peers)} address(es): {partition.spec} has "
                       f"{partition.groups} groups, so at most {partition.groups - 1} other peers hold this block")
    if set(options.block_peers) & {options.bind, *options.peers}:
        raise CRCError("--block-peers names this peer or a member of its own group")
    structure = model_options(options.model, options.model_options)
    with named_errors(options.schema, ModelTooLarge):  # the schema file made it too large
        model = block_model(options.model, shared, blocks, **structure)
    steps = BlockSteps(model, options.block)
    data = load_block(options.data, steps, options.id_column, shared.label)
    settings = PeerSettings(bind=options.bind, peers=tuple(options.peers), rounds=options.rounds,
                            timeout_s=options.timeout_s, first_round_timeout_s=options.first_round_timeout_s,
                            run=options.run, checkpoint_dir=options.checkpoint, down_after=options.down_after,
                            known_keys=keys.known if keys else None)
    if data.y is None and not options.peers:
        raise CRCError(f"{options.data}: a group of one peer is its label holder alone, whose --data needs the label "
                       f"column {shared.label!r}")
    _check_label_holder(options, holds_labels=data.y is not None, label=shared.label, log=log)
    role = LabelHolder if data.y is not None else GroupMember
    masks = (ScoreMasks(keys.own.secret, options.bind, {address: keys.known[address] for address in options.peers},
                        options.run) if options.secure_aggregation else None)
    named = {} if role is LabelHolder else {"label_holder": options.label_holder}
    peer = role(model, options.block, data, settings, ess=options.ess, lr=options.lr, log=log,
                block_neighbours=tuple(options.block_peers) if hybrid else None, masks=masks, **named)
    log.info("%s of block %d (%d features) of a group of %s: %d rows%s", peer.role, options.block,
             len(steps.schema.features), partition.spec, len(data.ids),
             f", {len(options.block_peers)} block neighbour(s)" if hybrid else "")
    if keys is None:
        log.warning("insecure: no keys, so scores and weights travel in plaintext and any process that reaches %s can "
                    "send them in a member's name", options.bind)
    return VerticalNode(options, structure, partition.spec, peer, keys)


def _check_label_holder(options: NodeOptions, *, holds_labels: bool, label: str, log: logging.Logger) -> None:
    """A CRCError if ``--label-holder`` contradicts this peer's data (the label holder is the peer whose file has the
    ``label`` column) or names no member; a warning if a member goes without it."""
    holder = options.label_holder
    if holder is None:
        if not holds_labels:
            log.warning("no --label-holder: this member answers the first PSI request it gets, so a member posing as "
                        "the label holder could learn which of its guessed ids this peer holds")
        return
    if holds_labels and holder != options.bind:
        raise CRCError(f"{options.data} has the label column {label!r}, so this peer is the label holder, but "
                       f"--label-holder names {holder}")
    if not holds_labels and holder not in options.peers:
        what = "this peer, whose data has no label column" if holder == options.bind else "no member of --peers"
        raise CRCError(f"--label-holder {holder} names {what}: give the address of the member whose data has the "
                       f"label column {label!r}")


def load_block(path, steps: BlockSteps, id_column: str, label: str) -> BlockData:
    """A vertical peer's CSV file: the ``id_column``, the block's feature columns and, for the label holder only, the
    ``label`` column. Ids are compared as written (``007`` is not ``7``). A CRCError naming the file for a missing or
    duplicated id, a missing or extra column, an unknown class or category, an unparsable number or an empty file."""
    if id_column == label or id_column in steps.model.schema.feature_names:
        what = "the schema's label" if id_column == label else "a feature of the schema"
        raise CRCError(f"--id-column {id_column!r} is {what}: name the column of instance ids")
    columns = read_csv(path, text=(id_column,))
    if id_column not in columns:
        raise CRCError(f"{path}: no id column {id_column!r} (--id-column names the column of instance ids)")
    ids = check_ids(columns.pop(id_column).texts(), str(path))
    schema = steps.schema
    extra = [name for name in columns if name not in schema.feature_names and name != label]
    if extra:
        raise CRCError(f"{path}: column(s) {', '.join(map(repr, extra[:5]))} are neither this block's features nor the "
                       "label (a peer holds its own block's columns only: see --blocks and --block)")
    holder = label in columns
    x, y = encode(schema, columns, labels=holder, source=str(path))
    return BlockData(ids=ids, phi=feature_map(path, schema, steps.part, x), y=y, source=str(path))
