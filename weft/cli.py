"""Console entry point for `weft` (placeholder until its issue lands)."""

import sys


def main() -> None:
    print("weft: not yet implemented", file=sys.stderr)
    sys.exit(2)
