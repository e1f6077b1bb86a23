"""Running the ``crc`` command in-process, and its one-line errors."""

from click.testing import CliRunner

from crc.cli.main import main


def run(*args):
    """``crc ARGS...`` (each argument as a string) through click's runner."""
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line(result, status: int, message: str) -> None:
    """``result`` exited with ``status`` and says ``message`` (line breaks taken as spaces), without a traceback."""
    assert result.exit_code == status, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
