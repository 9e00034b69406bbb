"""Console entry point for `pattern` (placeholder until its issue lands)."""

import sys


def main() -> None:
    print("pattern: not yet implemented", file=sys.stderr)
    sys.exit(2)
