"""Real peers: wire format, ZeroMQ transport, the peer (a round driver and its rooms), checkpoints, the `crc node` process,
deployment files, the launcher.

Layer: installed as ``crc.nodes``; on ``crc.core``, ``crc.protocol`` and ``crc.topologies``.
"""
