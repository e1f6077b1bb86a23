"""TOML reading for the tests on every Python the project supports (tomllib from 3.11, tomli before, as crc's)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

__all__ = ["tomllib"]
