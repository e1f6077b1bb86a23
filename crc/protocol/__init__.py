"""Simulation protocol."""
