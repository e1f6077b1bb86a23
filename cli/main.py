"""The ``crc`` command: subcommands are imported when used, so that a peer starts quickly."""

from __future__ import annotations

import importlib

import click

from crc.core.errors import CRCError

COMMANDS = {
    "simulate": "crc.cli.simulate:simulate",
    "experiment": "crc.cli.experiment:experiment",
    "report": "crc.cli.report:report",
    "datasets": "crc.cli.simulate:datasets",
    "schema": "crc.cli.peer:schema",
    "split": "crc.cli.split:split",
    "node": "crc.cli.peer:node",
    "predict": "crc.cli.peer:predict",
    "launch": "crc.cli.launch:launch",
    "graph": "crc.cli.graph:graph",
    "bench": "crc.cli.bench:bench",
}


class CRCGroup(click.Group):
    """Loads subcommands lazily and turns CRCError into a one-line message and exit status 1."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attribute)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CRCError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=CRCGroup)
@click.version_option(package_name="crc-p2p")
def main():
    """Collaborative risk-based calibration (CRC): peers learn a generative
    classifier together by sharing sufficient statistics, never data."""
