"""Vela's own result for a model: compile it in process with Vela 5.2 (its default C++ core, or
its legacy Python core) and read back the totals Vela reports, to compare schedules against."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from ethosu.vela import stats_writer, vela
from ethosu.vela.tensor import TensorAddressMap, create_equivalence_id

from cascader.ethosu.vela_arch import DEFAULT_VELA_INI, check_accelerator, system_arch

__all__ = ["OPTIMISE", "VelaError", "VelaResult", "captured_output", "run_vela"]

OPTIMISE = ("Performance", "Size")


class VelaError(RuntimeError):
    """Vela refused or failed to compile the model; carries Vela's own output."""


@dataclass(frozen=True)
class VelaResult:
    """Vela's summary of one compilation (per inference, batch 1)."""

    model: str
    core: str  # "regor" (Vela's default) or "legacy-python" (--debug-force-legacy-core)
    accelerator: str
    system_config: str
    memory_mode: str
    optimise: str
    arena_cache_size: int | None
    cycles_total: float
    cycles_npu: float
    cycles_access: dict[str, float]
    inference_time_s: float
    sram_used_bytes: int
    dram_used_bytes: int
    offchip_flash_used_bytes: int
    onchip_flash_used_bytes: int
    bytes: dict[str, float]
    macs: int
    encoded_weights_bytes: int
    npu_ops: int
    cpu_ops: int

    def to_json(self) -> dict:
        return asdict(self)


_AREAS = {"sram": "sram", "dram": "dram", "onchip_flash": "on_chip_flash",
          "offchip_flash": "off_chip_flash"}  # fmt: skip


def checked_inputs(
    model_path: str | Path, optimise: str, config_path: str | Path | None
) -> tuple[Path, Path]:
    """The model and vela.ini paths of an in-process Vela run, checked before Vela sees them."""
    model = Path(model_path)
    if not model.is_file():
        raise FileNotFoundError(f"model {model} not found")
    if optimise not in OPTIMISE:
        raise ValueError(f"unknown optimise strategy {optimise!r}; valid: {', '.join(OPTIMISE)}")
    return model, Path(config_path) if config_path is not None else DEFAULT_VELA_INI


def fresh_vela_state() -> None:
    """Start a legacy-core compile as a fresh `vela` process would. Vela derives tensor ids
    from constant contents through a process-wide cache and keys addresses by them in a
    process-wide map, so a constant shared with an earlier compile (a softmax LUT, a MEAN's
    all-ones weights) would keep that compile's address or area and the compile fails."""
    create_equivalence_id.cache_clear()
    TensorAddressMap.address_map.clear()


def run_vela(
    model_path: str | Path,
    accelerator: str,
    system_config: str,
    memory_mode: str,
    optimise: str = "Performance",
    arena_cache_size: int | None = None,
    legacy: bool = False,
    config_path: str | Path | None = None,
) -> VelaResult:
    """Compile `model_path` with Vela in this process; returns Vela's totals. Bad names raise
    DeviceConfigError listing the valid ones; a failed compile raises VelaError."""
    model, ini = checked_inputs(model_path, optimise, config_path)
    system_arch(check_accelerator(accelerator), system_config, memory_mode, arena_cache_size, ini)
    if legacy:
        fresh_vela_state()
    with tempfile.TemporaryDirectory(prefix="vela-") as out_dir:
        argv = [
            str(model),
            "--accelerator-config", accelerator,
            "--config", str(ini),
            "--system-config", system_config,
            "--memory-mode", memory_mode,
            "--optimise", optimise,
            "--output-dir", out_dir,
        ]  # fmt: skip
        if arena_cache_size is not None:
            argv += ["--arena-cache-size", str(int(arena_cache_size))]
        if legacy:
            argv.append("--debug-force-legacy-core")
        with captured_output() as output:
            try:
                status = vela.main(argv)
            except SystemExit as exc:
                status = exc.code
            except Exception as exc:
                raise VelaError(f"vela failed on {model.name}: {exc}") from exc
        text = "".join(output)
        summary = Path(out_dir) / f"{model.stem}_summary_{system_config}.csv"
        if status not in (0, None) or not summary.is_file():
            tail = " | ".join(text.strip().splitlines()[-3:])
            raise VelaError(f"vela failed on {model.name} (status {status}): {tail}")
        with summary.open(newline="") as f:
            row = next(csv.DictReader(f))
    return VelaResult(
        model=model.name,
        core="legacy-python" if legacy else "regor",
        accelerator=accelerator,
        system_config=system_config,
        memory_mode=memory_mode,
        optimise=optimise,
        arena_cache_size=arena_cache_size,
        cycles_total=float(row["cycles_total"]),
        cycles_npu=float(row["cycles_npu"]),
        cycles_access={a: float(row[f"cycles_{v}_access"]) for a, v in _AREAS.items()},
        inference_time_s=float(row["inference_time"]),
        sram_used_bytes=_kib(row["sram_memory_used"]),
        dram_used_bytes=_kib(row["dram_memory_used"]),
        offchip_flash_used_bytes=_kib(row["off_chip_flash_memory_used"]),
        onchip_flash_used_bytes=_kib(row["on_chip_flash_memory_used"]),
        bytes={a: float(row[f"{v}_total_bytes"]) for a, v in _AREAS.items()},
        macs=int(float(row["nn_macs"])),
        encoded_weights_bytes=int(float(row["total_npu_encoded_weights"])),
        npu_ops=_count(text, "NPU operators"),
        cpu_ops=_count(text, "CPU operators"),
    )


@contextlib.contextmanager
def captured_output() -> Iterator[list[str]]:
    """Vela's summary goes to the stdout it bound at import (a default argument) and to
    sys.stdout, and its C++ core (regor) to the file descriptors; capture all of it at the
    file-descriptor level so none of it reaches ours."""
    sys.stdout.flush()
    sys.stderr.flush()
    text: list[str] = []
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        python_level = io.StringIO()
        printers = (
            stats_writer.print_performance_metrics,
            stats_writer.print_performance_metrics_common,
        )
        defaults = [printer.__defaults__ for printer in printers]
        for printer, default in zip(printers, defaults, strict=False):
            printer.__defaults__ = (*default[:-1], python_level)  # its `f=sys.stdout`
        try:
            with contextlib.redirect_stdout(python_level), contextlib.redirect_stderr(python_level):
                yield text
        finally:
            for printer, default in zip(printers, defaults, strict=False):
                printer.__defaults__ = default
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sink.seek(0)
            text.append(sink.read().decode("utf-8", errors="replace"))
            text.append(python_level.getvalue())


def _kib(value: str) -> int:
    return round(float(value) * 1024)


def _count(text: str, label: str) -> int:
    match = re.search(rf"^{label} = (\d+)", text, re.MULTILINE)
    if match is None:
        raise VelaError(f"vela's summary has no {label!r} line")
    return int(match.group(1))
