"""Tables (Markdown, CSV) and figures (PNG, with the ``plot`` extra) from results JSON.

Layer: imports nothing of ``crc.experiments`` (which builds its grids on
``crc.report.kinds``); matplotlib is imported only when a figure is drawn.
"""
