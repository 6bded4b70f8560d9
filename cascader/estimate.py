"""A design point and its result, shared by every layer above the scheduler and needing no
TVM: the device (accelerator and memory system), what a point chooses (`PointConfig`), and
the typed `Estimate` every evaluator returns and every trial stores (as `to_json`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cascader.core.options import CascaderOptions
from cascader.ethosu.defaults import DEFAULT_ACCELERATOR, system_defaults
from cascader.ethosu.memory import SystemMemory, system_memory
from cascader.ethosu.perf import AREAS, OpPerf, PerfReport
from cascader.ir.origins import TfliteOrigin

__all__ = ["Device", "Estimate", "OpEstimate", "PointConfig"]


@dataclass(frozen=True)
class Device:
    """The fixed part of every point: the accelerator and its memory system (a vela.ini
    system config and memory mode; the family's defaults when not given)."""

    accelerator: str = DEFAULT_ACCELERATOR
    system_config: str | None = None
    memory_mode: str | None = None
    vela_config: str | Path | None = None

    def __post_init__(self) -> None:
        system, mode = system_defaults(self.accelerator, self.system_config, self.memory_mode)
        object.__setattr__(self, "system_config", system)
        object.__setattr__(self, "memory_mode", mode)

    def memory(self, sram_bytes: int) -> SystemMemory:
        """The memory system with an SRAM pool of `sram_bytes` (DeviceConfigError names the
        valid choices when a name is wrong)."""
        return system_memory(self.accelerator, self.system_config, self.memory_mode,
                             sram_bytes, self.vela_config)  # fmt: skip


@dataclass(frozen=True)
class PointConfig:
    """What a design point chooses: the SRAM pool, the cascader's options (None: off) and
    the cascade region its proposals are generated for (None: the pool; a sweep generates
    once at its largest pool and chooses per pool). With the cascader off, `buffer_weights`
    False reads every weight in place instead of copying some into SRAM first (the smallest
    layer-by-layer schedule). `narrow_nhwc`: feature maps whose channel count is not a
    multiple of 16 stored NHWC, not in 16-channel bricks (which pad them: less SRAM, about
    the same cycles). `row_sum_mean`: a mean over H and W sums each row first, then the
    row sums (`cascader.schedule.row_sums`), so its input runs in row stripes with the layers
    before it instead of being held whole (one more small op; no change without such a
    mean)."""

    sram_bytes: int
    options: CascaderOptions | None
    proposal_region_bytes: int | None = None
    buffer_weights: bool = True
    narrow_nhwc: bool = False
    row_sum_mean: bool = False


@dataclass(frozen=True)
class OpEstimate:
    """One NPU operation's share of a point's estimate. `name` is the TFLite operator's output
    tensor name (as Vela's per-layer report names layers), `tflite_index` and `tflite_op` the
    operator's index in the model and its type; an op of a decomposition (softmax, mean,
    resize) carries its operator's. Without a recorded origin (a hand-built graph), `name`
    is the NPU op's own and the two are None."""

    name: str
    kind: str
    stripes: int
    cycles: float
    macs: int
    bytes: dict[str, float]
    tflite_index: int | None = None
    tflite_op: str | None = None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "tflite_index": self.tflite_index,
            "tflite_op": self.tflite_op,
            "kind": self.kind,
            "stripes": self.stripes,
            "cycles": self.cycles,
            "macs": self.macs,
            "bytes": dict(self.bytes),
        }

    @classmethod
    def of_perf(cls, op: OpPerf, origin: TfliteOrigin | None = None) -> OpEstimate:
        moved = {a: op.bytes_read[a] + op.bytes_written[a] for a in AREAS}
        if origin is None:
            return cls(op.name, op.kind, op.stripes, op.total_cycles, op.macs, moved)
        return cls(origin.tensor, op.kind, op.stripes, op.total_cycles, op.macs, moved,
                   origin.index, origin.op)  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> OpEstimate:
        return cls(data["name"], data["kind"], data["stripes"], data["cycles"], data["macs"],
                   dict(data["bytes"]), data.get("tflite_index"),
                   data.get("tflite_op"))  # fmt: skip


@dataclass(frozen=True)
class Estimate:
    """One design point's result, from whichever evaluator scored it (`scored_by`: "vela",
    Vela's performance model over the point's schedule; "cascader", the cascader's own cost
    of a graph): what `dse estimate --json` prints and every trial stores. A point with no
    schedule at all carries the reason in `unscheduled` and no cycles or SRAM figure."""

    sram_pool_bytes: int
    options: CascaderOptions | None
    fits: bool
    sram_used_bytes: int | None
    total_cycles: float | None
    scored_by: str = "vela"
    source: str | None = None  # the model or graph file a study scored
    model: str | None = None
    model_sha256: str | None = None
    accelerator: str | None = None
    system_config: str | None = None
    memory_mode: str | None = None
    npu_cycles: float | None = None
    macs: int | None = None
    inference_time_s: float | None = None
    bytes: dict[str, float] = field(default_factory=dict)
    host_ops: tuple[str, ...] = ()
    ops: tuple[OpEstimate, ...] = ()
    unscheduled: str | None = None
    # The cascader's run (in the "cascader" object of `to_json`): its proposal count and the
    # one chosen (index 0: the smallest, so no smaller schedule of these options exists);
    # for a graph, also its seconds.
    proposals: int | None = None
    chosen_index: int | None = None
    cascader_seconds: float | None = None
    buffer_weights: bool = True  # with the cascader off: see PointConfig
    narrow_nhwc: bool = False  # see PointConfig
    row_sum_mean: bool = False  # see PointConfig
    # Who made the schedule: this project's cascader, or Vela's own compiler ("vela", whose
    # `options` are None: it is no cascader schedule).
    producer: str = "cascader"
    # The least SRAM any schedule of the model needs on this memory mode, and how that is
    # reached (`cascader.schedule.lower_bound`): what the floor is compared with.
    sram_lower_bound_bytes: int | None = None
    sram_lower_bound_derivation: str | None = None

    @classmethod
    def of_report(
        cls,
        model: tuple[str, str, tuple[str, ...]],
        memory: SystemMemory,
        options: CascaderOptions | None,
        sram_used: int,
        report: PerfReport,
        origins: Mapping[str, TfliteOrigin] | None = None,
    ) -> Estimate:
        """The estimate of a point of `model` (file name, sha256, host operators) scored
        with Vela's model (`report`); `origins`: the TFLite operator of each NPU op, by its
        name (`cascader.frontend.passes.FrontHalf.origins`)."""
        name, sha256, host_ops = model
        return cls(
            sram_pool_bytes=int(memory.sram_bytes),
            options=options,
            fits=sram_used <= memory.sram_bytes,
            sram_used_bytes=sram_used,
            total_cycles=report.total_cycles,
            model=name,
            model_sha256=sha256,
            accelerator=memory.accelerator,
            system_config=memory.system_config,
            memory_mode=memory.memory_mode,
            npu_cycles=report.npu_cycles,
            macs=report.macs,
            inference_time_s=report.inference_time_s,
            bytes={area: report.bytes(area) for area in AREAS},
            host_ops=host_ops,
            ops=tuple(OpEstimate.of_perf(op, (origins or {}).get(op.name)) for op in report.ops),
        )

    def with_source(self, source: str) -> Estimate:
        return replace(self, source=source)

    def to_json(self) -> dict:
        """DESIGN.md's estimate object; fields an evaluator does not produce are left out."""
        data: dict = {}
        if self.model is not None:
            data.update(
                model=self.model,
                model_sha256=self.model_sha256,
                accelerator=self.accelerator,
                system_config=self.system_config,
                memory_mode=self.memory_mode,
            )
        data["sram_pool_bytes"] = self.sram_pool_bytes
        data["cascader"] = {
            "enabled": self.options is not None,
            "options": self.options.to_json() if self.options is not None else {},
        }
        if self.options is None:
            data["cascader"]["buffer_weights"] = self.buffer_weights
        if self.narrow_nhwc:  # absent when False: estimates stored before it stay the same
            data["cascader"]["narrow_nhwc"] = True
        if self.row_sum_mean:  # absent when False, as narrow_nhwc
            data["cascader"]["row_sum_mean"] = True
        if self.proposals is not None:
            data["cascader"].update(proposals=self.proposals, chosen_index=self.chosen_index)
        if self.cascader_seconds is not None:
            data["cascader"]["seconds"] = self.cascader_seconds
        data["fits"] = self.fits
        if self.unscheduled is not None:
            data["unscheduled"] = self.unscheduled
        data.update(sram_used_bytes=self.sram_used_bytes, total_cycles=self.total_cycles)
        if self.sram_lower_bound_bytes is not None:
            data["sram_lower_bound_bytes"] = self.sram_lower_bound_bytes
            data["sram_lower_bound_derivation"] = self.sram_lower_bound_derivation
        if self.npu_cycles is not None:
            data["npu_cycles"] = self.npu_cycles
        if self.macs is not None:
            data["macs"] = self.macs
        if self.unscheduled is None:
            data["inference_time_s"] = self.inference_time_s
        data["bytes"] = dict(self.bytes)
        if self.model is not None:
            data.update(
                npu_ops=len(self.ops),
                host_ops=list(self.host_ops),
                ops=[op.to_json() for op in self.ops],
            )
        if self.source is not None:
            data.update(source=self.source, scored_by=self.scored_by)
        data["producer"] = self.producer
        return data

    @classmethod
    def from_json(cls, data: dict) -> Estimate:
        """An estimate as `to_json` wrote it (a stored trial's metrics)."""
        cascader = data["cascader"]
        options = CascaderOptions.from_json(cascader["options"]) if cascader["enabled"] else None
        return cls(
            sram_pool_bytes=data["sram_pool_bytes"],
            options=options,
            fits=data["fits"],
            sram_used_bytes=data["sram_used_bytes"],
            total_cycles=data["total_cycles"],
            scored_by=data.get("scored_by", "vela"),
            source=data.get("source"),
            model=data.get("model"),
            model_sha256=data.get("model_sha256"),
            accelerator=data.get("accelerator"),
            system_config=data.get("system_config"),
            memory_mode=data.get("memory_mode"),
            npu_cycles=data.get("npu_cycles"),
            macs=data.get("macs"),
            inference_time_s=data.get("inference_time_s"),
            bytes=dict(data.get("bytes", {})),
            host_ops=tuple(data.get("host_ops", ())),
            ops=tuple(OpEstimate.from_json(op) for op in data.get("ops", ())),
            unscheduled=data.get("unscheduled"),
            # Graph trials stored before these moved into "cascader" had them at the top.
            proposals=cascader.get("proposals", data.get("proposals")),
            chosen_index=cascader.get("chosen_index", data.get("chosen_index")),
            cascader_seconds=cascader.get("seconds", data.get("cascader_seconds")),
            buffer_weights=cascader.get("buffer_weights", True),
            narrow_nhwc=cascader.get("narrow_nhwc", False),
            row_sum_mean=cascader.get("row_sum_mean", False),
            producer=data.get("producer", "cascader"),
            sram_lower_bound_bytes=data.get("sram_lower_bound_bytes"),
            sram_lower_bound_derivation=data.get("sram_lower_bound_derivation"),
        )
