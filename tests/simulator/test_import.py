"""The simulator loads without TVM and exposes its small public API."""

from __future__ import annotations

import subprocess
import sys

import cascader.simulator as simulator


def test_import_does_not_load_tvm() -> None:
    code = "import cascader.simulator, sys; assert 'tvm' not in sys.modules, 'tvm imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_api() -> None:
    for name in (
        "RegionImage",
        "simulate",
        "SimulationResult",
        "Finding",
        "FindingKind",
        "SimulationError",
        "TensorPlacement",
        "read_tensor",
        "write_tensor",
        "run_vela_tflite",
    ):
        assert name in simulator.__all__
        assert getattr(simulator, name) is not None
