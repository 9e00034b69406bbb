"""Console entry point for `shuttle` (placeholder until its issue lands)."""

import sys


def main() -> None:
    print("shuttle: not yet implemented", file=sys.stderr)
    sys.exit(2)
