"""``python -m crc`` runs the ``crc`` command (``crc launch`` starts its peers this way)."""

from crc.cli.entry import main

main()
