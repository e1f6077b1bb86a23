"""The core mathematics: schema, data, models as sufficient statistics, RC and LRC, the CRC engine, metrics,
partitions, and the files they read and write.

Layer: the bottom. Imports the standard library, numpy, scipy and threadpoolctl only: no
networking, no graph library, no command line, nothing else of ``crc``.
"""
