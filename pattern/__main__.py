"""``python -m pattern``: same as the ``pattern`` console script."""

from pattern.cli import main

main()
