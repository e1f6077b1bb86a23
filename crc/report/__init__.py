"""Tables (Markdown, CSV) and figures (PNG, with the ``plot`` extra) from results JSON."""
