"""``python -m pattern``: same as the ``pattern`` console script."""

import sys

from pattern.cli import main

sys.exit(main())
