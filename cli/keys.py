"""``crc keys``: CURVE key pairs for authenticated, encrypted peers."""

from __future__ import annotations

import click

from crc.nodes.keys import load_public_key, write_keys


@click.command(short_help="Write a CURVE key pair per name (for crc node --secret-key).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Directory to write the key files into.")
@click.option("--force", is_flag=True, help="Replace existing key files of these names.")
@click.argument("names", nargs=-1, required=True)
def keys(out, force, names):
    """Write a CURVE key pair per NAME in pyzmq's certificate format:
    OUT/NAME.key (the public key: give it to the neighbours, who put it in
    their --known-peers file) and OUT/NAME.key_secret (the secret key, file
    mode 0600: it stays on the peer's machine, for `crc node --secret-key`).

    Existing keys are never overwritten without --force. Prints each public
    key (z85).
    """
    for public, secret in write_keys(out, names, force=force):
        click.echo(f"{public}  {load_public_key(public)}  (secret: {secret})")
