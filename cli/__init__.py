"""The ``crc`` command (click): thin commands that call the packages below and turn results into output.

Layer: installed as ``crc.cli``, on top of everything; nothing imports it but ``crc.__main__``.
"""
