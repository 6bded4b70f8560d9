"""A compiled design point written out for a production build."""

from __future__ import annotations

import json
from pathlib import Path

from cascader.artifact.vela_tflite import model_for_firmware
from cascader.ethosu.codegen import Compiled
from cascader.ir.schedule import Schedule
from cascader.point import Estimate
from cascader.schedule.point import Point


def write_build(
    out: Path, model: bytes, stem: str, estimate: Estimate, point: Point, compiled: Compiled
) -> Path:
    """Write a compiled point into `out`: `<stem>_dse.tflite` (the model as the firmware
    runs it, `vela_tflite`), and per NPU function i `npu<i>.cs` (register command stream
    words, little-endian) and `npu<i>.payload` (Vela's driver payload), plus `constants.bin`
    and `manifest.json` (regions, sizes, I/O addresses, the estimate). The caller checks
    `fits` first: a schedule over the pool is written all the same. Returns the model's
    path."""
    shipped = model_for_firmware(model, compiled, point.schedule)
    out.mkdir(parents=True, exist_ok=True)
    tflite = out / f"{stem}_dse.tflite"
    tflite.write_bytes(shipped)
    functions = []
    for index, stream in enumerate(compiled.functions):
        cs, payload = f"npu{index}.cs", f"npu{index}.payload"
        (out / cs).write_bytes(stream.command_stream)
        (out / payload).write_bytes(stream.driver_payload)
        functions.append(
            {
                "name": stream.name,
                "command_stream": cs,
                "driver_payload": payload,
                "operations": len(stream.operations),
            }
        )
    (out / "constants.bin").write_bytes(compiled.constants)
    schedule = point.schedule
    memory = point.memory
    manifest = {
        "format": "cascader-dse-compiled",
        "version": 1,
        "model": tflite.name,
        "regions": {
            "0": {
                "role": "constants",
                "area": memory.roles["constants"],
                "file": "constants.bin",
                "bytes": len(compiled.constants),
            },
            "1": {"role": "arena", "area": memory.roles["io"], "bytes": schedule.arena_bytes},
        },
        "scratch_bytes": schedule.scratch_bytes,
        "functions": functions,
        "io": _io_json(schedule),
        "estimate": estimate.to_json(),
    }
    if memory.roles["cascade"] != memory.roles["io"]:
        manifest["regions"]["2"] = {
            "role": "fast_scratch",
            "area": memory.roles["cascade"],
            "bytes": schedule.scratch_bytes,
        }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return tflite


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
