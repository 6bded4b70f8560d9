"""A compiled design point written out for a production build."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from cascader.artifact.firmware_tflite import model_for_firmware
from cascader.estimate import Estimate
from cascader.ethosu.codegen import Compiled
from cascader.ir.schedule import Schedule
from cascader.schedule.point_scheduler import Point


def write_build(
    out: Path, model: bytes, stem: str, estimate: Estimate, point: Point, compiled: Compiled
) -> Path:
    """Write a compiled point into `out` (see `build_files`): each file replaced whole (a
    temporary file renamed over it, so a symlink there is replaced, never written through),
    and the command streams and payloads of an earlier build that this one does not list
    removed. A build that must not touch the previous one until it is complete goes into a
    fresh folder that then takes its place (`dse compile` does). Returns the model's path."""
    files = build_files(model, stem, estimate, point, compiled)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        _replace(out / name, data)
    for stale in out.iterdir():
        if _STREAM_FILE.fullmatch(stale.name) and stale.name not in files:
            stale.unlink()
    return out / f"{stem}_dse.tflite"


_STREAM_FILE = re.compile(r"npu[0-9]+\.(cs|payload)")


def _replace(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_files(
    model: bytes, stem: str, estimate: Estimate, point: Point, compiled: Compiled
) -> dict[str, bytes]:
    """The files of a compiled point by name: `<stem>_dse.tflite` (the model as the
    firmware runs it, `firmware_tflite`), and per NPU function i `npu<i>.cs` (register command
    stream words, little-endian) and `npu<i>.payload` (Vela's driver payload), plus
    `constants.bin` and `manifest.json` (regions, sizes, I/O addresses, the estimate), which
    lists them all (each function named `npu<i>` as its files, with its stripes and DMA
    copies: a layer of the network runs as one or more stripes, the words the CLI uses). The
    caller checks `fits` first: a schedule over the pool is written all the same."""
    tflite = f"{stem}_dse.tflite"
    files = {tflite: model_for_firmware(model, compiled, point.schedule)}
    functions = []
    for index, stream in enumerate(compiled.functions):
        name = f"npu{index}"
        cs, payload = f"{name}.cs", f"{name}.payload"
        files[cs] = stream.command_stream
        files[payload] = stream.driver_payload
        functions.append(
            {
                "name": name,
                "command_stream": cs,
                "driver_payload": payload,
                "stripes": stream.stripes,
                "dma_copies": stream.dma_copies,
            }
        )
    files["constants.bin"] = compiled.constants
    schedule = point.schedule
    memory = point.memory
    manifest = {
        "format": "cascader-dse-compiled",
        "version": 1,
        "model": tflite,
        "regions": {
            "0": {
                "role": "constants",
                "area": memory.constants_area,
                "file": "constants.bin",
                "bytes": len(compiled.constants),
            },
            "1": {"role": "arena", "area": memory.io_area, "bytes": schedule.arena_bytes},
        },
        "scratch_bytes": schedule.scratch_bytes,
        "functions": functions,
        "io": _io_json(schedule),
        "estimate": estimate.to_json(),
    }
    if memory.cascade_area != memory.io_area:
        manifest["regions"]["2"] = {
            "role": "fast_scratch",
            "area": memory.cascade_area,
            "bytes": schedule.scratch_bytes,
        }
    files["manifest.json"] = (json.dumps(manifest, indent=1) + "\n").encode()
    return files


def _io_json(schedule: Schedule) -> list[dict]:
    """Each graph input and output: its name, shape, layout and where it lives."""
    net = schedule.network
    rows = []
    for kind, tensors in (("input", net.graph.input_tensors), ("output", net.graph.output_tensors)):
        for tensor in tensors:
            if tensor.is_constant or tensor.id not in schedule.tensor_buffer:
                continue
            fm = net.feature_map(tensor.id)
            buf = schedule.buffers[schedule.tensor_buffer[tensor.id]]
            rows.append(
                {
                    "kind": kind,
                    "name": fm.name,
                    "shape": list(fm.shape),
                    "dtype": fm.dtype,
                    "layout": fm.layout.value,
                    "region": buf.region,
                    "address": buf.address,
                    "bytes": buf.size,
                }
            )
    return rows
