"""Console entry point for `warp` (placeholder until its issue lands)."""

import sys


def main() -> None:
    print("warp: not yet implemented", file=sys.stderr)
    sys.exit(2)
