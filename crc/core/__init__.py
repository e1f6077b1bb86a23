"""Core mathematics."""
