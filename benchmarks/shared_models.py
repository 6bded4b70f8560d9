"""The `--models-dir` / `--models` arguments the fidelity and correlation scripts share."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cascader.testing.shared import shared_dir


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    shared = shared_dir()
    parser.add_argument("--models-dir", type=Path,
                        default=shared / "models" if shared else None)  # fmt: skip
    parser.add_argument("--models", nargs="*", help="model stems (default: every .tflite)")


def model_paths(args: argparse.Namespace) -> list[Path] | None:
    """The chosen .tflite files, or None (after saying why) when there is no models folder."""
    if args.models_dir is None or not args.models_dir.is_dir():
        print("no models directory: set CASCADER_SHARED or pass --models-dir", file=sys.stderr)
        return None
    paths = sorted(args.models_dir.glob("*.tflite"))
    return [p for p in paths if p.stem in args.models] if args.models else paths
