"""Locate the team's read-only `shared/` folder (real models, golden graphs, baselines)."""

from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path | None:
    """$CASCADER_SHARED if set, else `shared/` beside the repository; None if absent."""
    env = os.environ.get("CASCADER_SHARED")
    candidate = Path(env) if env else _REPO_ROOT.parent / "shared"
    return candidate if candidate.is_dir() else None
