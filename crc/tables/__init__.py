"""Tables from files: CSV reading (pandas) into factorized columns, and data sets by name.

Layer: on ``crc.core`` only (it adds pandas, for reading); ``crc.protocol``,
``crc.nodes``, ``crc.estimators``, ``crc.bench`` and ``crc.cli`` read data
through it.
"""
