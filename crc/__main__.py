"""``python -m crc`` runs the ``crc`` command (``crc launch`` starts its peers this way)."""

from crc.cli.main import main

main()
