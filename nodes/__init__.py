"""Real peers: wire format, ZeroMQ transport, the round loop, checkpoints, deployment files, the launcher.

Layer: installed as ``crc.nodes``; on ``crc.core``, ``crc.protocol`` and ``crc.topologies``.
"""
