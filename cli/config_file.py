"""Settings from a TOML file for any click command: ``--config FILE`` and ``--print-config``.

A command made with ``@click.command(cls=ConfigFileCommand)`` takes every one of its options from a TOML file too,
as top-level keys named like the options without their dashes (``timeout = 5``, ``first-round-timeout = 60``,
``insecure = true``, ``peers = ["tcp://10.0.0.6:7000", "tcp://10.0.0.7:7000"]``). The precedence is pip's: the
defaults < the file < the command line (the file's values become click's ``default_map``). Nothing in the file is
trusted: it is size-limited, each key must be an option of the command and each value of the TOML type the option
takes; click then converts and checks the values as it does the command line's, and any problem is one line naming
the file, the key and the problem (exit status 2, a malformed option). Paths in the file are relative to the file's
directory. ``--print-config`` prints the effective settings as TOML that ``--config`` reads back, and exits.

A new option needs no code here; a parameter type that holds a path inside a larger value (a data set's name or a
CSV file, say) says how to resolve it with a ``relative_to_config(value, directory)`` method.
"""

from __future__ import annotations

import datetime
import difflib
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import click
from click.core import ParameterSource

from crc.core.errors import CRCError
from crc.core.files import read_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

MAX_CONFIG_BYTES = 64 * 1024
"""Largest configuration file read: a peer's settings take about a kilobyte."""
_LOADED = "crc.config"
"""``ctx.meta`` key: (the file, {parameter name: the file's key}) of the file the settings came from."""
_PRINT = "crc.print_config"
_SHOWN_CHARS = 60


class StringList(click.ParamType):
    """Strings given comma-separated on the command line or as a TOML array of strings in a configuration file;
    a tuple of the non-empty ones, stripped."""

    name = "list"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            self.fail(f"expected comma-separated strings or a list of strings, got {_shown(value)}", param, ctx)
        return tuple(item.strip() for item in items if item.strip())


class ConfigFileCommand(click.Command):
    """A click command with ``--config FILE`` and ``--print-config`` for all its other options."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.params += [
            click.Option(["--config"], type=click.Path(dir_okay=False), is_eager=True, expose_value=False,
                         callback=_load, metavar="FILE",
                         help="Read the options from this TOML file: keys named like the options (timeout = 5; a "
                              'list as ["a", "b"]), paths relative to the file; the command line overrides it.'),
            click.Option(["--print-config"], is_flag=True, expose_value=False, callback=_remember_print,
                         help="Print the effective settings (defaults, then --config, then the command line) as TOML "
                              "that --config reads, and exit."),
        ]

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.BadParameter as exc:
            loaded = ctx.meta.get(_LOADED)
            if isinstance(exc, click.MissingParameter) and loaded is None:
                raise click.UsageError(f"{exc.format_message()} Give it on the command line or in a --config FILE.",
                                       ctx=ctx) from None
            name = exc.param.name if exc.param is not None else None
            if loaded is None or name not in loaded[1] or ctx.get_parameter_source(name) is not ParameterSource.DEFAULT_MAP:
                raise
            raise click.UsageError(f"{loaded[0]}: {loaded[1][name]}: {exc.message}", ctx=ctx) from None

    def invoke(self, ctx):
        if ctx.meta.get(_PRINT):
            click.echo(effective_config(ctx), nl=False)
            ctx.exit(0)
        return super().invoke(ctx)


def option_key(param: click.Parameter) -> str:
    """The key of ``param`` in a configuration file: its long option name without the dashes."""
    longest = max(param.opts, key=len)
    return longest.lstrip("-")


def configurable(command: click.Command) -> dict[str, click.Option]:
    """The options of ``command`` a file may set, by key."""
    return {option_key(p): p for p in command.params
            if isinstance(p, click.Option) and p.expose_value and not p.hidden}


def read_config(path, command: click.Command) -> dict:
    """The settings of the TOML file ``path`` for ``command`` as click's ``default_map`` (parameter name -> value),
    each value of the TOML type its option takes and its paths relative to the file's directory; a CRCError naming
    the file (and the key) otherwise."""
    raw = read_bytes(path, max_bytes=MAX_CONFIG_BYTES, what="configuration file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CRCError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CRCError(f"{path}: not TOML: {exc}") from None
    except (RecursionError, ValueError):  # nesting deeper than the parser's stack, an integer of thousands of digits
        raise CRCError(f"{path}: not TOML this reader accepts (nested too deeply or a number too long)") from None
    options = configurable(command)
    directory = Path(path).parent
    settings = {}
    for key, value in table.items():
        if key not in options:
            close = difflib.get_close_matches(key, list(options), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CRCError(f"{path}: {key}: no such option{hint}")
        param = options[key]
        problem = _type_problem(param, value)
        if problem:
            raise CRCError(f"{path}: {key}: {problem}")
        if isinstance(value, datetime.datetime):  # a TOML date-time, e.g. for --start-at
            value = value.isoformat()
        settings[param.name] = _resolve_paths(param, value, directory)
    return settings


def effective_config(ctx: click.Context) -> str:
    """The effective settings of the command of ``ctx`` as TOML for ``--config``: every option in the order of
    its help, paths absolute, unset ones as comments, each setting not left to its default marked with its source."""
    loaded = ctx.meta.get(_LOADED)
    lines = [f"# {ctx.command_path} settings: defaults, then --config, then the command line.",
             f"# Read back with: {ctx.command_path} --config FILE"]
    for key, param in configurable(ctx.command).items():
        if param.name not in ctx.params:
            continue
        value = ctx.params[param.name]
        if value is None or value == ():
            lines.append(f"# {key}: not set")
            continue
        source = ctx.get_parameter_source(param.name)
        origin = {ParameterSource.COMMANDLINE: "  # from the command line",
                  ParameterSource.ENVIRONMENT: "  # from the environment",
                  ParameterSource.DEFAULT_MAP: f"  # from {loaded[0]}" if loaded else ""}.get(source, "")
        lines.append(f"{key} = {toml_value(_resolve_paths(param, value, Path.cwd()))}{origin}")
    return "\n".join(lines) + "\n"


def toml_text(settings: Mapping[str, object], *, comment: str = "") -> str:
    """``settings`` (key -> string, number, boolean or list of those) as TOML, after ``comment`` lines."""
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    lines += [f"{key} = {toml_value(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def toml_value(value) -> str:
    """One value in TOML: a string, a number, a boolean or a list of those."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str | os.PathLike):
        # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
        return json.dumps(os.fspath(value), ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__} {value!r}")


def _load(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--config``'s callback (eager, so before any other option): the file's settings become click's defaults."""
    if value is None or ctx.resilient_parsing:
        return
    try:
        settings = read_config(value, ctx.command)
    except CRCError as exc:
        raise click.UsageError(str(exc), ctx=ctx) from None
    keys = {name: option_key(p) for p in ctx.command.params for name in [p.name] if name in settings}
    ctx.meta[_LOADED] = (value, keys)
    ctx.default_map = {**(ctx.default_map or {}), **settings}


def _remember_print(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta[_PRINT] = True


def _type_problem(param: click.Option, value) -> str | None:
    """Why ``value`` from a TOML file cannot be ``param``'s (None: it can, and click converts and checks it)."""
    if param.multiple or param.nargs != 1:
        return None if isinstance(value, list) else f"expected a list, got {_kind(value)} {_shown(value)}"
    kind = param.type
    if isinstance(kind, StringList):
        ok, wanted = isinstance(value, str | list), "a list of strings"
    elif isinstance(kind, click.types.BoolParamType):
        ok, wanted = isinstance(value, bool), "true or false"
    elif isinstance(kind, click.types.IntParamType):
        ok, wanted = isinstance(value, int) and not isinstance(value, bool), "a whole number"
    elif isinstance(kind, click.types.FloatParamType):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and not (isinstance(value, float) and math.isnan(value))
        wanted = "a number"
    else:
        ok, wanted = isinstance(value, str | datetime.datetime), "a string"
    return None if ok else f"expected {wanted}, got {_kind(value)} {_shown(value)}"


def _resolve_paths(param: click.Parameter, value, directory: Path):
    """``value`` with the paths it holds taken relative to ``directory`` (absolute ones stay)."""
    if value is None:
        return value
    if isinstance(param.type, click.Path):
        return os.fspath(directory / value) if isinstance(value, str) else value
    resolve = getattr(param.type, "relative_to_config", None)
    return resolve(value, directory) if resolve is not None else value


def _kind(value) -> str:
    return {bool: "a boolean", int: "a whole number", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), f"a {type(value).__name__}")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."
