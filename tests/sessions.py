"""Sessions for the tests, kept per (model, device): many tests schedule points of the same
few models, and a model's front half costs seconds. Thin wrappers over `cascader.pipeline`."""

from __future__ import annotations

import functools
from pathlib import Path

from cascader.artifact.build import write_build
from cascader.core.options import CascaderOptions
from cascader.estimate import Device, Estimate, PointConfig
from cascader.pipeline import PreparedModel, Session, prepare_model


def _bytes(model: str | Path | bytes) -> bytes:
    return bytes(model) if isinstance(model, bytes | bytearray) else Path(model).read_bytes()


@functools.lru_cache(maxsize=16)
def _prepared(model: bytes, accelerator: str) -> PreparedModel:
    return prepare_model(model, accelerator)


def prepared_model(model: str | Path | bytes, accelerator: str) -> PreparedModel:
    """The model prepared for `accelerator` (`cascader.pipeline.prepare_model`), built once
    per test process."""
    return _prepared(_bytes(model), accelerator)


@functools.lru_cache(maxsize=16)
def _session(model: bytes, name: str, device: Device) -> Session:
    session = Session(model, device, prepared=_prepared(model, device.accelerator))
    session.model_name = name
    return session


def session(
    model: str | Path | bytes,
    accelerator: str,
    system_config: str,
    memory_mode: str,
    vela_config: str | Path | None = None,
) -> Session:
    """A session of the model on the device, shared by the tests that ask for the same."""
    name = "model.tflite" if isinstance(model, bytes | bytearray) else Path(model).name
    device = Device(accelerator, system_config, memory_mode, vela_config)
    return _session(_bytes(model), name, device)


def estimate(
    model: str | Path | bytes,
    accelerator: str,
    system_config: str,
    memory_mode: str,
    sram_bytes: int,
    options: CascaderOptions | None,
    vela_config: str | Path | None = None,
    proposal_region_bytes: int | None = None,
) -> Estimate:
    """`Session.score` of one point."""
    found = session(model, accelerator, system_config, memory_mode, vela_config)
    return found.score(PointConfig(sram_bytes, options, proposal_region_bytes))


def compile_model(
    model: str | Path | bytes,
    output_dir: str | Path,
    accelerator: str,
    system_config: str,
    memory_mode: str,
    sram_bytes: int,
    options: CascaderOptions | None,
    vela_config: str | Path | None = None,
    proposal_region_bytes: int | None = None,
):
    """`Session.compile` of one point, written into `output_dir` as `dse compile` writes it
    (`model.tflite`'s stem for bytes): (estimate, point, compiled)."""
    found = session(model, accelerator, system_config, memory_mode, vela_config)
    estimate, point, compiled = found.compile(
        PointConfig(sram_bytes, options, proposal_region_bytes)
    )
    stem = "model" if isinstance(model, bytes | bytearray) else Path(model).stem
    write_build(Path(output_dir), found.model_bytes, stem, estimate, point, compiled)
    return estimate, point, compiled
