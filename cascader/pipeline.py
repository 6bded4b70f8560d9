"""The end-to-end flow of one model on one Ethos-U device: a `Session` runs the front half
(import, partition, legalize, cascader graph) once, then schedules, scores and compiles as
many design points as asked: with the cascader on (its options) or off (the copy-constants
schedule) -> stripe schedule -> Vela's performance estimate (`Session.score`, a typed
`Estimate`), or -> command streams, payloads and constants written to a directory
(`Session.compile`).

A session keeps what its points share (the cascader's runs and proposal schedules in its
`PointScheduler`, scores per proposal), bounded; nothing is cached at module level."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from cascader.core.collector import collector_paused
from cascader.core.lru import LruCache
from cascader.core.options import CascaderOptions
from cascader.ethosu.codegen import Compiled, generate
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.perf import evaluate
from cascader.frontend.passes import front_half
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.schedule import Schedule
from cascader.point import Device, Estimate, PointConfig
from cascader.schedule.network import Network, network
from cascader.schedule.point import Point, PointScheduler

__all__ = ["Front", "Session", "load_front"]


@dataclass(frozen=True)
class Front:
    """A model after the front half: its NPU network and the operators left on the host,
    and the scheduler of its points (which keeps what they share)."""

    sha256: str
    network: Network
    host_ops: tuple[str, ...]

    @cached_property
    def scheduler(self) -> PointScheduler:
        return PointScheduler(self.network)


def load_front(model: bytes, accelerator: str) -> Front:
    """Import, partition and legalize `model` and build its cascader graph for `accelerator`."""
    half = front_half(model)
    sha = hashlib.sha256(model).hexdigest()
    return Front(sha, network(list(half.functions), accelerator), half.host_ops)


class Session:
    """One model on one device. The front half runs once, when the session is made (bad
    input fails there: ModelError, LegalizeError, DeviceConfigError); points are scheduled,
    scored and compiled from it. `front` may be given when the caller already has it."""

    def __init__(
        self, model: str | Path | bytes, device: Device, front: Front | None = None
    ) -> None:
        if isinstance(model, bytes | bytearray):
            self.model_bytes, self.model_name = bytes(model), "model.tflite"
        else:
            self.model_bytes, self.model_name = load_tflite(model), Path(model).name
        self.device = device
        self.front = front or load_front(self.model_bytes, device.accelerator)
        self.scheduler = self.front.scheduler
        # A proposal's (SRAM bytes, PerfReport) by its schedule's key: many pools choose
        # the same proposal, and scoring it is most of a point's time.
        self.scores = LruCache(1024)

    def _options(self, config: PointConfig, memory: SystemMemory) -> CascaderOptions | None:
        if config.options is None:
            return None
        return replace(config.options, cascade_region=memory.roles["cascade"])

    def schedule(self, config: PointConfig, feature_maps: str = "io") -> Point:
        """The point's stripe schedule (see `PointScheduler.schedule_point`)."""
        memory = self.device.memory(config.sram_bytes)
        options = self._options(config, memory)
        region = config.proposal_region_bytes
        with collector_paused():
            return self.scheduler.schedule_point(memory, options, feature_maps, region)

    def score(self, config: PointConfig) -> Estimate:
        """Vela's performance estimate of the point's schedule; one that does not fit the
        pool comes back with `fits` False."""
        with collector_paused():
            estimate, _, _ = self._run(config, command_streams=False)
        return estimate

    def compile(
        self, config: PointConfig, output_dir: str | Path
    ) -> tuple[Estimate, Point, Compiled]:
        """Compile the point and write, per NPU function i, `npu<i>.cs` (register command
        stream words, little-endian) and `npu<i>.payload` (Vela's driver payload), plus
        `constants.bin` and `manifest.json` (regions, sizes, I/O addresses, the estimate).
        The caller checks `fits` first: a schedule over the pool is written all the same."""
        with collector_paused():
            estimate, point, compiled = self._run(config, command_streams=True)
        assert point is not None and compiled is not None  # always built with command streams
        _write_build(Path(output_dir), estimate, point, compiled)
        return estimate, point, compiled

    def _run(
        self, config: PointConfig, command_streams: bool
    ) -> tuple[Estimate, Point | None, Compiled | None]:
        """The point's estimate and, when they were built (always with `command_streams`),
        its schedule and compiled form: an estimate of a proposal scored before builds
        neither."""
        memory = self.device.memory(config.sram_bytes)
        options = self._options(config, memory)
        point = compiled = scored = chosen = key = None
        if options is not None:
            chosen, key = self.scheduler.chosen(memory, options, config.proposal_region_bytes)
            if not command_streams:
                scored = self.scores.lookup(key)
        if scored is None:
            point = (
                self.scheduler.chosen_point(memory, chosen, key)
                if chosen is not None
                else self.scheduler.schedule_point(memory, None)
            )
            compiled = generate(point.schedule, memory.accelerator, command_streams=command_streams)
            scored = (point.schedule.sram_bytes, evaluate(compiled.scheduled_ops, memory))
            if key is not None:
                self.scores.keep(key, scored)
        sram_used, report = scored
        model = (self.model_name, self.front.sha256, self.front.host_ops)
        return Estimate.of_report(model, memory, options, sram_used, report), point, compiled


def _write_build(out: Path, estimate: Estimate, point: Point, compiled: Compiled) -> None:
    out.mkdir(parents=True, exist_ok=True)
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
