"""No cache changes a result: a seeded sweep with every cache off (`DSE_CACHES=off`, the one
switch) finds the same front as with them on, and its points compile to the same bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cascader.artifact.build import build_files
from cascader.estimate import Device
from cascader.memo import caches_off
from cascader.pipeline import Session
from cascader.testing.networks import chain
from dse.space import DesignPoint

POOL_MAX = 256 * 1024
pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out


def _sweep(model: Path, folder: Path, caches: str) -> dict:
    folder.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "dse", "sweep", "--model", str(model), "--trials", "8",
         "--seed", "5", "--jobs", "1", "--producers", "cascader", "--sram-max", "256KiB",
         "--storage", f"sqlite:///{folder}/study.db", "--out", str(folder), "--json"],
        env={**os.environ, "DSE_CACHES": caches}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = json.loads(run.stdout)
    return {"trials": found["trials"], "front": found["front"]}


def _built(session: Session, model: bytes, row: dict) -> dict[str, bytes]:
    config = DesignPoint(**row["config"]).config(POOL_MAX)
    estimate, point, compiled = session.compile(config)
    return build_files(model, "chain", estimate, point, compiled)


def test_a_sweep_with_caches_off_finds_the_same_front_and_bytes(tmp_path: Path) -> None:
    model = tmp_path / "chain.tflite"
    model.write_bytes(chain().build())
    on = _sweep(model, tmp_path / "on", "on")
    off = _sweep(model, tmp_path / "off", "off")
    assert json.dumps(on, sort_keys=True) == json.dumps(off, sort_keys=True)
    assert on["front"]

    warm = Session(model, Device())
    warm_files = [_built(warm, model.read_bytes(), row) for row in on["front"]]
    with caches_off():
        cold = Session(model, Device())
        cold_files = [_built(cold, model.read_bytes(), row) for row in on["front"]]
    assert cold_files == warm_files
    assert cold.scheduler.cascades.hits == 0 and not cold.scores  # nothing was kept
