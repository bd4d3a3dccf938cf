"""`python -m durable_plan` works where the console script is not on PATH."""

import sys

from durable_plan.cli import main

if __name__ == "__main__":
    sys.exit(main())
