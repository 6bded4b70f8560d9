"""Fixtures of the simulator tests: Vela 5.2 compiles (cached per session, run in-process
with its console output silenced, C++ core included) and LiteRT's built-in kernels."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from ethosu.vela import vela

from cascader.testing.quiet import silenced
from cascader.testing.shared import shared_dir

Compile = Callable[..., bytes]


_VELA_CHILD = "import sys; from ethosu.vela import vela; sys.exit(vela.main(sys.argv[1:]))"


@pytest.fixture(scope="session")
def vela_compile(tmp_path_factory: pytest.TempPathFactory) -> Compile:
    """compile(model, accelerator, legacy=False, *extra) -> the Vela output file's bytes.
    The legacy core keeps state between compiles in one process, so it runs in a child."""
    cache: dict[tuple, bytes] = {}

    def compile_(model: bytes, accelerator: str, legacy: bool = False, *extra: str) -> bytes:
        key = (model, accelerator, legacy, extra)
        if key not in cache:
            work = tmp_path_factory.mktemp("vela")
            source = work / "model.tflite"
            source.write_bytes(model)
            argv = [str(source), "--output-dir", str(work), "--accelerator-config", accelerator]
            argv += extra
            if legacy:
                command = [sys.executable, "-c", _VELA_CHILD, *argv, "--debug-force-legacy-core"]
                child = subprocess.run(command, capture_output=True, text=True)
                assert child.returncode == 0, child.stdout + child.stderr
            else:
                with silenced():
                    assert vela.main(argv) == 0, f"Vela failed on {accelerator}"
            cache[key] = (work / "model_vela.tflite").read_bytes()
        return cache[key]

    return compile_


@pytest.fixture(scope="session")
def shared_models() -> Path:
    shared = shared_dir()
    if shared is None:
        pytest.skip("../shared is absent")
    return shared / "models"
