"""What a long command is doing before its progress bar starts (reading the model with TVM,
probing floors), said on a terminal as Vela says its phases; nothing when stderr is not a
terminal, so scripts and `--json` runs see only results and one-line errors."""

from __future__ import annotations

import sys


def say(text: str) -> None:
    if sys.stderr.isatty():
        print(f"dse: {text}", file=sys.stderr, flush=True)
