"""Weft as an Agent2Agent (A2A) peer: each project is an A2A agent (docs/a2a.md)."""
