"""The exception of the graph package: an impossible or unreadable topology (one of the project's CRCErrors)."""

from crc.core.errors import CRCError


class TopologyError(CRCError):
    """A topology that cannot be built (bad spec, impossible parameters, unreadable graph file); one line, naming it."""
