"""Topology sources: one module per platform input, each a function of an env mapping."""
