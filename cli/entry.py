"""The ``crc`` command's entry point (the installed script, and ``python -m crc``): Ctrl-C while the command line
is still importing (numpy, scipy, click: about half a second) ends it as Ctrl-C while it runs does, with
'Interrupted.' and exit status 130, not a traceback. Importing this module loads nothing heavy."""

import sys

INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as a shell reports it."""


def main() -> None:
    """Import the command line, then run it."""
    try:
        from crc.cli.main import main as command
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        sys.exit(INTERRUPTED)
    command()
