"""Spin-up targets: the registry of places Weft can start agents from."""
