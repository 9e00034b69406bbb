import sys

from deploy.runner.cli import main

sys.exit(main())
