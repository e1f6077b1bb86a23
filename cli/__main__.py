"""``python -m cli`` runs the ``crc`` command (used by ``crc launch`` to start peers)."""

from cli.main import main

main()
