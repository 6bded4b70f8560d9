"""The end-to-end flow of one design point: a TFLite model, an Ethos-U system and an SRAM pool,
with the cascader on (its options) or off (the copy-constants schedule) -> stripe schedule ->
Vela's performance estimate (`estimate`), or -> command streams, payloads and constants
written to a directory (`compile_model`).

The front half (import, partition, legalize, cascader graph) depends only on the model and
the accelerator, and a sweep asks for many pools and options per model, so it is cached in
process by (model sha256, accelerator)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

from cascader.core.cascade import CascadeResult, cascade
from cascader.core.collector import collector_paused
from cascader.core.options import CascaderOptions
from cascader.core.proposal_generation import choose_proposal
from cascader.ethosu.codegen import Compiled, encoded_size, generate
from cascader.ethosu.memory import SystemMemory, system_memory
from cascader.ethosu.perf import AREAS, PerfReport, evaluate
from cascader.flow.cascader_graph import graph_document
from cascader.flow.frontend import import_tflite, load_tflite
from cascader.flow.legalize import choose_layouts, legalize, remove_identities
from cascader.flow.lru import LruCache
from cascader.flow.partition import host_ops, partition_for_ethosu
from cascader.flow.schedule import (
    Network,
    Schedule,
    ScheduleError,
    layer_by_layer_schedule,
    network,
    proposal_schedule,
)

__all__ = [
    "Estimate",
    "Point",
    "compile_model",
    "estimate",
    "front_half",
    "proposal_options",
    "proposals",
    "schedule_point",
]

_FRONT_CACHE_SIZE = 8


@dataclass(frozen=True)
class Front:
    """A model after the front half: its NPU network and the operators left on the host."""

    sha256: str
    network: Network
    host_ops: tuple[str, ...]


_FRONTS = LruCache(_FRONT_CACHE_SIZE)  # Front by (model sha256, accelerator)


def _model_bytes(model: str | Path | bytes) -> tuple[bytes, str]:
    if isinstance(model, bytes | bytearray):
        return bytes(model), "model.tflite"
    return load_tflite(model), Path(model).name


_DIGESTS = LruCache(_FRONT_CACHE_SIZE)  # (model bytes, sha256) by id of the bytes


def _sha256(model: bytes) -> str:
    """The model's sha256, remembered for the very bytes object (`load_tflite` hands a sweep
    the same one every trial, and hashing a 4 MB model took 6 ms a point). The entry holds
    the object, so its id cannot be reused while the entry lives; only immutable bytes are
    remembered."""
    if type(model) is not bytes:
        return hashlib.sha256(model).hexdigest()
    found = _DIGESTS.lookup(id(model))
    if found is not None and found[0] is model:
        return found[1]
    sha = hashlib.sha256(model).hexdigest()
    _DIGESTS.keep(id(model), (model, sha))
    return sha


def front_half(model: bytes, accelerator: str) -> Front:
    """Import, partition and legalize `model` and build its cascader graph for `accelerator`
    (cached per model sha256 and accelerator, least recently used first out)."""
    sha = _sha256(model)
    key = (sha, accelerator)
    found = _FRONTS.lookup(key)
    if found is not None:
        return found
    module = partition_for_ethosu(import_tflite(model))
    functions = [choose_layouts(remove_identities(f)) for f in legalize(module)]
    found = Front(sha, network(functions, accelerator), tuple(host_ops(module)))
    _FRONTS.keep(key, found)
    return found


@dataclass(frozen=True)
class Point:
    """One design point's schedule: the memory system, the cascader's run (None when off),
    the chosen proposal's index, the stripe schedule and whether it fits the pool."""

    memory: SystemMemory
    cascade: CascadeResult | None
    schedule: Schedule
    fits: bool


_CASCADES = LruCache(64)  # CascadeResult by _cascade_key
# A proposal's stripe schedule does not depend on the pool it was chosen for (only whether it
# fits does), and many pools choose the same proposal: its SRAM bytes and score are kept for
# many schedules, the schedules themselves (tens of thousands of objects each, which every
# full garbage collection scans) for a few, e.g. a compile right after an estimate.
_SCHEDULES = LruCache(8)  # Schedule by proposal key
_SCORES = LruCache(1024)  # (SRAM bytes, PerfReport) by proposal key


def proposal_options(options: CascaderOptions) -> CascaderOptions:
    """The options that make the same proposals as `options`: without striping every part
    has only its whole output as a stripe, whatever the stripe factors and whether striping
    is multi-dimensional, so those take their defaults and such option sets share one run
    (invalid stripe factors stay, for the cascader to refuse)."""
    if options.enable_striping or options.stripe_factors <= 0:
        return options
    defaults = CascaderOptions()
    return replace(
        options,
        stripe_factors=defaults.stripe_factors,
        enable_multi_dimensional_striping=defaults.enable_multi_dimensional_striping,
    )


def _cascade_key(
    front: Front, memory: SystemMemory, options: CascaderOptions, region_bytes: int
) -> tuple:
    return (front.sha256, memory.accelerator, memory.system_config, memory.memory_mode,
            memory.config_path, proposal_options(options), region_bytes)  # fmt: skip


def proposals(
    front: Front, memory: SystemMemory, options: CascaderOptions, region_bytes: int
) -> CascadeResult:
    """The cascader's proposals for a cascade region of `region_bytes`, cached per (model,
    system, options, region): a sweep chooses among one set of proposals for every pool size
    instead of generating them again per pool."""
    key = _cascade_key(front, memory, options, region_bytes)
    found = _CASCADES.lookup(key)
    if found is not None:
        return found
    region = system_memory(memory.accelerator, memory.system_config, memory.memory_mode,
                           region_bytes, memory.config_path)  # fmt: skip
    document = graph_document(front.network.graph, region, proposal_options(options))
    try:
        found = cascade(document.graph, document.regions, document.home_map, document.options)
    except ValueError as error:  # no proposal covers the graph
        raise ScheduleError(f"the cascader made no schedule: {error}") from None
    _CASCADES.keep(key, found)
    return found


# The cascader's budget of a proposal and the SRAM its schedule really takes differ by a few
# KiB either way (encoded weight sizes, alignment, buffers the budget counts twice), so a pool
# looks a little past the budget for a proposal that really fits, trying a few at most.
_BUDGET_SLACK = 1.04
_FIT_TRIES = 3
_NEEDS = LruCache(4096)  # a proposal schedule's SRAM bytes by proposal key


def _proposal_schedule(
    front: Front, memory: SystemMemory, result: CascadeResult, index: int, key: tuple
) -> Schedule:
    schedule = _SCHEDULES.lookup(key)
    if schedule is None:
        size = encoded_size(memory.accelerator, front.network.ops)
        proposal = result.proposals[index]
        schedule = proposal_schedule(front.network, proposal, memory, size, check=False)
        _SCHEDULES.keep(key, schedule)
        _NEEDS.keep(key, schedule.sram_bytes)
    return schedule


def _need(front: Front, memory: SystemMemory, result: CascadeResult, key: tuple) -> int:
    """The SRAM bytes the schedule of proposal `key[-1]` really takes."""
    found = _NEEDS.lookup(key)
    if found is None:
        found = _proposal_schedule(front, memory, result, key[-1], key).sram_bytes
    return found


def _chosen(
    front: Front,
    memory: SystemMemory,
    options: CascaderOptions,
    proposal_region_bytes: int | None,
) -> tuple[CascadeResult, tuple]:
    """The proposals with the one chosen for the pool, and the key of its schedule: the
    cascader's own choice (the fastest within its budget) if its schedule really fits, else
    the fastest of the next few near the pool that does; when none fits, the one of the
    smallest few that really needs least, so an infeasible point reports the least SRAM any
    schedule needs."""
    region = proposal_region_bytes or memory.sram_bytes
    generated = proposals(front, memory, options, region)
    props = generated.proposals
    pool = memory.sram_bytes
    base = _cascade_key(front, memory, options, region)
    first = choose_proposal(props, pool)
    near = sorted(
        (i for i, p in enumerate(props) if i != first and p.memory_usage <= pool * _BUDGET_SLACK),
        key=lambda i: (props[i].cycles, i),
    )
    tried = [first, *near][:_FIT_TRIES]
    for index in tried:
        if _need(front, memory, generated, (*base, index)) <= pool:
            return replace(generated, chosen_index=index), (*base, index)
    smallest = sorted(range(len(props)), key=lambda i: (props[i].memory_usage, i))[:_FIT_TRIES]
    index = min(
        dict.fromkeys([*tried, *smallest]),
        key=lambda i: (_need(front, memory, generated, (*base, i)), props[i].cycles, i),
    )
    return replace(generated, chosen_index=index), (*base, index)


def schedule_point(
    front: Front,
    memory: SystemMemory,
    options: CascaderOptions | None,
    feature_maps: str = "io",
    proposal_region_bytes: int | None = None,
) -> Point:
    """The stripe schedule of a point. With the cascader on, the chosen proposal (the
    smallest one when none fits, so an infeasible point still has a score); off, the
    copy-constants schedule with feature maps in the `feature_maps` role's area. The point
    fits when what the schedule holds in SRAM fits the pool (the cascader's own budget of a
    proposal counts some buffers twice, so it can refuse a proposal that fits).

    Proposals are generated for a cascade region of `proposal_region_bytes` (default: the
    pool) and the proposal is chosen for the pool. A larger generation region keeps every
    small proposal and adds larger ones, so a sweep generates once at its largest pool."""
    if options is None:
        schedule = layer_by_layer_schedule(
            front.network,
            memory,
            encoded_size(memory.accelerator, front.network.ops),
            feature_maps,
            check=False,
        )
        return Point(memory, None, schedule, schedule.sram_bytes <= memory.sram_bytes)
    return _chosen_point(front, memory, *_chosen(front, memory, options, proposal_region_bytes))


def _chosen_point(front: Front, memory: SystemMemory, result: CascadeResult, key: tuple) -> Point:
    """The point of the proposal `_chosen` picked (`result.chosen_index`, schedule `key`)."""
    schedule = _proposal_schedule(front, memory, result, result.chosen_index, key)
    return Point(memory, result, schedule, schedule.sram_bytes <= memory.sram_bytes)


@dataclass(frozen=True)
class Estimate:
    """What `dse estimate --json` prints for one point (DESIGN.md's object)."""

    model: str
    model_sha256: str
    accelerator: str
    system_config: str
    memory_mode: str
    sram_pool_bytes: int
    options: CascaderOptions | None
    fits: bool
    sram_used_bytes: int
    report: PerfReport
    host_ops: tuple[str, ...]

    def to_json(self) -> dict:
        report = self.report
        return {
            "model": self.model,
            "model_sha256": self.model_sha256,
            "accelerator": self.accelerator,
            "system_config": self.system_config,
            "memory_mode": self.memory_mode,
            "sram_pool_bytes": self.sram_pool_bytes,
            "cascader": {
                "enabled": self.options is not None,
                "options": self.options.to_json() if self.options is not None else {},
            },
            "fits": self.fits,
            "sram_used_bytes": self.sram_used_bytes,
            "total_cycles": report.total_cycles,
            "npu_cycles": report.npu_cycles,
            "macs": report.macs,
            "inference_time_s": report.inference_time_s,
            "bytes": {area: report.bytes(area) for area in AREAS},
            "npu_ops": len(report.ops),
            "host_ops": list(self.host_ops),
            "ops": [
                {
                    "name": op.name,
                    "kind": op.kind,
                    "stripes": op.stripes,
                    "cycles": op.total_cycles,
                    "macs": op.macs,
                    "bytes": {a: op.bytes_read[a] + op.bytes_written[a] for a in AREAS},
                }
                for op in report.ops
            ],
        }


def _run(
    model: str | Path | bytes,
    accelerator: str,
    system_config: str,
    memory_mode: str,
    sram_bytes: int,
    options: CascaderOptions | None,
    vela_config: str | Path | None,
    command_streams: bool,
    proposal_region_bytes: int | None = None,
) -> tuple[Estimate, Point | None, Compiled | None]:
    """The point's estimate and, when they were built (always with `command_streams`), its
    schedule and compiled form: an estimate of a proposal scored before builds neither."""
    data, name = _model_bytes(model)
    memory = system_memory(accelerator, system_config, memory_mode, sram_bytes, vela_config)
    front = front_half(data, accelerator)
    point = compiled = scored = chosen = key = None
    if options is not None:
        options = replace(options, cascade_region=memory.roles["cascade"])
        chosen, key = _chosen(front, memory, options, proposal_region_bytes)
        if not command_streams:
            scored = _SCORES.lookup(key)
    if scored is None:
        point = (
            _chosen_point(front, memory, chosen, key)
            if chosen is not None
            else schedule_point(front, memory, None)
        )
        compiled = generate(point.schedule, accelerator, command_streams=command_streams)
        scored = (point.schedule.sram_bytes, evaluate(compiled.scheduled_ops, memory))
        if key is not None:
            _SCORES.keep(key, scored)
    sram_used, report = scored
    result = Estimate(
        model=name,
        model_sha256=front.sha256,
        accelerator=accelerator,
        system_config=system_config,
        memory_mode=memory_mode,
        sram_pool_bytes=int(sram_bytes),
        options=options,
        fits=sram_used <= memory.sram_bytes,
        sram_used_bytes=sram_used,
        report=report,
        host_ops=front.host_ops,
    )
    return result, point, compiled


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
    """Vela's performance estimate of the point's schedule. `options` None turns the cascader
    off. A point whose schedule does not fit the pool comes back with `fits` False.
    `proposal_region_bytes`: see `schedule_point`."""
    with collector_paused():
        result, _, _ = _run(model, accelerator, system_config, memory_mode, sram_bytes, options,
                            vela_config, command_streams=False,
                            proposal_region_bytes=proposal_region_bytes)  # fmt: skip
    return result


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
) -> tuple[Estimate, Point]:
    """Compile the point and write, per NPU function i, `npu<i>.cs` (register command
    stream words, little-endian) and `npu<i>.payload` (Vela's driver payload), plus
    `constants.bin` and `manifest.json` (regions, sizes, I/O addresses, the estimate). The
    caller checks `fits` first: a schedule over the pool is written all the same."""
    with collector_paused():
        result, point, compiled = _run(model, accelerator, system_config, memory_mode,
                                       sram_bytes, options, vela_config, command_streams=True,
                                       proposal_region_bytes=proposal_region_bytes)  # fmt: skip
    assert point is not None and compiled is not None  # always built with command streams
    out = Path(output_dir)
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
        "estimate": result.to_json(),
    }
    if memory.roles["cascade"] != memory.roles["io"]:
        manifest["regions"]["2"] = {
            "role": "fast_scratch",
            "area": memory.roles["cascade"],
            "bytes": schedule.scratch_bytes,
        }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return result, point


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
