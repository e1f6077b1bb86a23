"""The one exception family of the project, and how its messages show a value. Imports nothing heavy: ``crc`` imports
it, and the ``crc`` command's entry point imports ``crc`` before it can handle Ctrl-C (``crc.cli.entry``)."""

import contextlib


class CRCError(ValueError):
    """Invalid input or state: a bad data file, schema, statistics vector or option.

    Messages name the offending thing (file, column, value) so that the
    command-line interface can print them as a single line.
    """


class OptionConflict(CRCError):
    """Options that cannot go together, each valid alone: on the command line, a usage error (exit status 2)."""


class MalformedOption(CRCError):
    """An option value that does not parse (a malformed address): on the command line, a usage error (exit
    status 2)."""


@contextlib.contextmanager
def named_errors(source, kind: type[CRCError] = CRCError):
    """A context whose errors of ``kind`` say where they come from: raised again as CRCErrors, their message prefixed
    with ``source`` (a file or data set name)."""
    try:
        yield
    except kind as exc:
        raise CRCError(f"{source}: {exc}") from None


def plain(value) -> str:
    """``repr(value)`` as a message shows it: a numpy scalar as the Python value it holds (``0.35``, not
    ``np.float64(0.35)``), and a list or tuple of them likewise."""
    import numpy as np  # here: loaded anyway by the time a message shows a value

    if isinstance(value, np.generic):
        return repr(value.item())
    if isinstance(value, (list, tuple)):
        inner = ", ".join(map(plain, value))
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return repr(value)
