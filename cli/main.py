"""The ``crc`` command: subcommands are imported when used, so that a peer starts quickly."""

from __future__ import annotations

import contextlib
import difflib
import importlib
import logging
import os
import sys

import click

from crc.cli.entry import INTERRUPTED
from crc.cli.output import VERBOSITY_KEY, configure_logging
from crc.core.errors import CRCError, MalformedOption, OptionConflict
from crc.core.threads import threads

COMMANDS = {
    "simulate": "crc.cli.simulate:simulate",
    "experiment": "crc.cli.experiment:experiment",
    "report": "crc.cli.report:report",
    "datasets": "crc.cli.simulate:datasets",
    "schema": "crc.cli.schema:schema",
    "split": "crc.cli.split:split",
    "node": "crc.cli.peer:node",
    "predict": "crc.cli.peer:predict",
    "launch": "crc.cli.launch:launch",
    "graph": "crc.cli.graph:graph",
    "bench": "crc.cli.bench:bench",
    "keys": "crc.cli.keys:keys",
    "status": "crc.cli.status:status",
}
READER_GONE = 141
"""Exit status when standard output's reader left early (``crc simulate | head -1``): 128 + SIGPIPE, as a shell reports
a command that signal ended."""


def _from_graph_library(exc: BaseException) -> bool:
    """An exception raised by networkx itself (checked by module name: the group does not import networkx)."""
    return any(cls.__module__.split(".")[0] == "networkx" for cls in type(exc).__mro__)


def _say_interrupted() -> None:
    """'Interrupted.' on standard error. A second Ctrl-C meanwhile (a user pressing twice; `timeout -s INT` signals
    the command and then its process group) is the same interruption: it must not end the command with click's
    'Aborted!' and status 1."""
    with contextlib.suppress(KeyboardInterrupt):
        click.echo("Interrupted.", err=True)


class CRCGroup(click.Group):
    """Loads subcommands lazily and ends every expected failure with one line: options that cannot go together
    (OptionConflict) and malformed option values (MalformedOption) give exit status 2, another CRCError (or an
    error of the graph library) 1, Ctrl-C 130, and a reader of standard output that left early (a broken pipe) ends it
    quietly with 141."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attribute)

    def resolve_command(self, ctx, args):
        name = args[0] if args else ""
        close = difflib.get_close_matches(name, COMMANDS, n=1) if name not in COMMANDS else []
        if close:
            ctx.fail(f"No such command {name!r}. (Did you mean {close[0]!r}?)")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (OptionConflict, MalformedOption) as exc:
            raise click.UsageError(str(exc)) from None
        except CRCError as exc:
            raise click.ClickException(str(exc)) from None
        except BrokenPipeError:  # nothing more can be written; at exit Python would complain once more on flushing
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(READER_GONE)
        except OSError as exc:  # a file or the system refused (no space, no file descriptor left): one line too
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:
            _say_interrupted()
            ctx.exit(INTERRUPTED)
        except Exception as exc:
            if _from_graph_library(exc):
                raise click.ClickException(f"communication graph: {exc}") from None
            raise


@click.group(cls=CRCGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="crc-p2p")
@click.option("-v", "--verbose", count=True, help="Say more: info messages (-v) and debug logs (-vv); a peer's log one step more.")
@click.option("-q", "--quiet", count=True, help="Say less: no progress, notes or warnings, only errors; a peer logs warnings only.")
@click.pass_context
def main(ctx, verbose, quiet):
    """Collaborative risk-based calibration (CRC): peers learn a generative
    classifier together by sharing sufficient statistics, never data.

    Run `crc COMMAND --help` for a command's options. Verbosity applies to the
    command that follows: `crc -q simulate`, `crc -v launch`.

    CRC_THREADS=N in the environment sets the threads that circuits and
    networks of at least 64 peers per thread compute on (default: the CPUs,
    at most 4; 1 for none); results do not depend on it.
    """
    threads()  # a bad CRC_THREADS is one clear error before any work, not one in the middle of it
    level = verbose - quiet
    ctx.meta[VERBOSITY_KEY] = level
    configure_logging(logging.WARNING - 10 * level)
