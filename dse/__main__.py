"""`python -m dse` runs the same CLI as the `dse` script."""

import sys

from dse.cli import script

sys.exit(script())
