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
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from cascader.core.gc_pause import collector_paused
from cascader.core.options import CascaderOptions
from cascader.estimate import Device, Estimate, PointConfig
from cascader.ethosu.codegen import Compiled, generate, scored_ops
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.perf import PerfReport, evaluate
from cascader.ir.npu_ops import NpuFunction, Tie
from cascader.ir.origins import TfliteOrigin
from cascader.memo import Memo
from cascader.schedule.lower_bound import SramLowerBound, derivation, sram_lower_bound
from cascader.schedule.network import Network, network
from cascader.schedule.point_scheduler import Point, PointScheduler
from cascader.schedule.policies import ScheduleKey
from cascader.schedule.row_sums import row_sum_means

if TYPE_CHECKING:
    from cascader.frontend.passes import FrontHalf

__all__ = ["PreparedModel", "Session", "prepare_model"]


@dataclass(frozen=True)
class PreparedModel:
    """A model prepared for scoring its points (the front half, then its network): its NPU
    network, the operators left on the host, the TFLite operator each NPU op stands for,
    and the scheduler of its points (which keeps what they share). It keeps what the
    network was built from (the front half's functions and ties), so the network of another
    form (`variant`: the layout of narrow feature maps, means summing rows first) is built
    without importing the model again."""

    sha256: str
    network: Network
    host_ops: tuple[str, ...]
    functions: tuple[NpuFunction, ...]
    ties: tuple[Tie, ...]
    accelerator: str
    origins: Mapping[str, TfliteOrigin] = field(default_factory=dict)
    narrow_nhwc: bool = False  # the network's layout of narrow feature maps (`network`)
    row_sum_mean: bool = False  # its means' sums split rows first (`schedule.row_sums`)
    # The other forms of the network, built on first use, shared by every form of the model.
    _variants: dict[tuple[bool, bool], PreparedModel] = field(
        default_factory=dict, compare=False, repr=False
    )

    @cached_property
    def scheduler(self) -> PointScheduler:
        return PointScheduler(self.network)

    @property
    def form(self) -> tuple[bool, bool]:
        """(narrow_nhwc, row_sum_mean): what tells this model's networks apart."""
        return self.narrow_nhwc, self.row_sum_mean

    @cached_property
    def sums_rows(self) -> bool:
        """Whether `row_sum_mean` changes the network (a mean whose sum splits)."""
        return any(row_sum_means(f)[1] for f in self.functions)

    def variant(self, narrow_nhwc: bool, row_sum_mean: bool = False) -> PreparedModel:
        """The model with narrow feature maps stored NHWC (`narrow_nhwc`) or in bricks, and
        its means summing rows first (`row_sum_mean`, where one splits; elsewhere the same
        network, so a model without such a mean shares one scheduler): this one, or another
        form's, built on first use and kept with its own scheduler."""
        form = (narrow_nhwc, row_sum_mean and self.sums_rows)
        self._variants.setdefault(self.form, self)
        if form not in self._variants:
            self._variants[form] = self._built(*form)
        return self._variants[form]

    def _built(self, narrow_nhwc: bool, row_sum_mean: bool) -> PreparedModel:
        functions, origins = self.functions, dict(self.origins)
        if row_sum_mean:
            functions = []
            for function in self.functions:
                split, made = row_sum_means(function)
                functions.append(split)
                origins |= {new: origins[old] for new, old in made.items() if old in origins}
        built = network(functions, self.accelerator, self.ties, narrow_nhwc)
        return replace(self, network=built, origins=origins, narrow_nhwc=narrow_nhwc,
                       row_sum_mean=row_sum_mean)  # fmt: skip


def prepare_model(model: bytes, accelerator: str, half: FrontHalf | None = None) -> PreparedModel:
    """Import, partition and legalize `model` and build its cascader graph for `accelerator`.
    `half`: the model's `front_half` when the caller has it (it does not depend on the
    accelerator, and building the graph leaves it as it was)."""
    if half is None:
        from cascader.frontend.passes import front_half  # TVM: only where a model is imported

        half = front_half(model)
    sha = hashlib.sha256(model).hexdigest()
    functions = tuple(half.functions)
    net = network(functions, accelerator, half.ties)
    return PreparedModel(sha, net, half.host_ops, functions, tuple(half.ties), accelerator,
                         half.origins)  # fmt: skip


class Session:
    """One model on one device. The front half runs once, when the session is made (bad
    input fails there: ModelError, LegalizeError, DeviceConfigError); points are scheduled,
    scored and compiled from it. `prepared` may be given when the caller already has it."""

    def __init__(
        self,
        model: str | Path | bytes,
        device: Device,
        prepared: PreparedModel | None = None,
        name: str | None = None,
    ) -> None:
        if isinstance(model, bytes | bytearray):
            self.model_bytes, self.model_name = bytes(model), name or "model.tflite"
        else:
            from cascader.frontend.tflite_import import load_tflite  # TVM, as prepare_model

            self.model_bytes, self.model_name = load_tflite(model), name or Path(model).name
        self.device = device
        self.prepared = prepared or prepare_model(self.model_bytes, device.accelerator)
        self.scheduler = self.prepared.scheduler
        self._forms: dict[tuple[bool, bool], PreparedModel] = {self.prepared.form: self.prepared}
        # A schedule's (SRAM bytes, PerfReport) by its network's form (`PreparedModel.form`),
        # its `ScheduleKey` and whether the pool took its fallback (a pool under a prebuffered
        # schedule's SRAM runs the fallback's steps): many pools choose the same proposal,
        # option sets make the same plans, and scoring is most of a point's time.
        self.scores: Memo[
            tuple[tuple[bool, bool], ScheduleKey, bool | None], tuple[int, PerfReport]
        ] = Memo("Session.scores", 1024)

    def schedulers(self) -> tuple[PointScheduler, ...]:
        """The scheduler of each form of the network the session's points used (the prepared
        model's own always): what its cache counts add up."""
        return tuple(prepared.scheduler for prepared in self._forms.values())

    def prepared_for(self, config: PointConfig) -> PreparedModel:
        """The prepared model of the point's form of the network (its layout of narrow
        feature maps, whether its means sum rows first)."""
        prepared = self.prepared.variant(config.narrow_nhwc, config.row_sum_mean)
        return self._forms.setdefault(prepared.form, prepared)

    @cached_property
    def _bound_with_arena_in_sram(self) -> tuple[SramLowerBound, str]:
        """The SRAM lower bound where the arena is in SRAM, and how it is reached: a pure
        function of the networks, asked by every point."""
        return self._least_bound(io_in_memory=True)

    def _least_bound(self, io_in_memory: bool) -> tuple[SramLowerBound, str]:
        """The smallest of the network's forms' bounds (narrow feature maps NHWC are never
        larger than in bricks, a mean summing rows first holds less, but each form's smallest
        stripes are its own), so the bound holds for every schedule of any."""
        found = []
        row_sums = (False, True) if self.prepared.sums_rows else (False,)
        for form in itertools.product((False, True), row_sums):
            prepared = self.prepared.variant(*form)
            bound = sram_lower_bound(prepared.network, io_in_memory=io_in_memory)
            found.append((bound.bytes, prepared.form, bound, prepared))
        _, _, bound, prepared = min(found, key=lambda f: f[:2])
        net = prepared.network
        if bound.part is None:
            return bound, derivation(bound, net, "")
        op = net.ops[bound.part]
        origin = prepared.origins.get(op.name)
        label = f"{origin.op} {origin.tensor!r}" if origin is not None else repr(op.name)
        return bound, derivation(bound, net, label)

    def sram_lower_bound(self, memory: SystemMemory) -> tuple[SramLowerBound, str]:
        """The least SRAM any schedule of the model needs on `memory`'s memory mode
        (`cascader.schedule.lower_bound`: nothing when the arena is elsewhere), and how it
        is reached, in a sentence."""
        if memory.io_area != "sram":
            return self._least_bound(io_in_memory=False)
        return self._bound_with_arena_in_sram

    def _options(self, config: PointConfig, memory: SystemMemory) -> CascaderOptions | None:
        if config.options is None:
            return None
        return replace(config.options, cascade_region=memory.cascade_area)

    def schedule(self, config: PointConfig, feature_maps: str = "io") -> Point:
        """The point's stripe schedule (see `PointScheduler.schedule_point`)."""
        memory = self.device.memory(config.sram_bytes)
        options = self._options(config, memory)
        region = config.proposal_region_bytes
        with collector_paused():
            return self.prepared_for(config).scheduler.schedule_point(
                memory, options, feature_maps, region, config.buffer_weights
            )

    def score(self, config: PointConfig) -> Estimate:
        """Vela's performance estimate of the point's schedule; one that does not fit the
        pool comes back with `fits` False."""
        with collector_paused():
            estimate, _, _ = self._run(config, command_streams=False)
        return estimate

    def compile(self, config: PointConfig) -> tuple[Estimate, Point, Compiled]:
        """The point's estimate, schedule and compiled form (command streams, driver
        payloads, encoded constants); `cascader.artifact.build` writes them out."""
        with collector_paused():
            estimate, point, compiled = self._run(config, command_streams=True)
        assert point is not None and compiled is not None  # always built with command streams
        return estimate, point, compiled

    def _run(
        self, config: PointConfig, command_streams: bool
    ) -> tuple[Estimate, Point | None, Compiled | None]:
        """The point's estimate and, when they were built (always with `command_streams`),
        its schedule and compiled form: an estimate of a proposal scored before builds
        neither."""
        memory = self.device.memory(config.sram_bytes)
        options = self._options(config, memory)
        prepared = self.prepared_for(config)
        scheduler = prepared.scheduler
        point = compiled = scored = chosen = key = None
        if options is not None:
            chosen, key = scheduler.chosen(memory, options, config.proposal_region_bytes)
            content = scheduler.schedule_key(memory, chosen, key)
        else:
            content = scheduler.layer_key(memory, buffer_weights=config.buffer_weights)
        fallback = scheduler.takes_fallback(content, memory.sram_bytes)
        if not command_streams and fallback is not None:
            scored = self.scores.lookup((prepared.form, content, fallback))
        if scored is None:
            point = (
                scheduler.chosen_point(memory, chosen, key)
                if chosen is not None
                else scheduler.schedule_point(memory, None, buffer_weights=config.buffer_weights)
            )
            if command_streams:
                compiled = generate(point.schedule, memory.accelerator)
                ops = compiled.scheduled_ops
            else:
                ops = scored_ops(point.schedule, memory.accelerator)
            scored = (point.schedule.sram_bytes, evaluate(ops, memory))
            fallback = scheduler.takes_fallback(content, memory.sram_bytes)
            self.scores.keep((prepared.form, content, fallback), scored)
        sram_used, report = scored
        model = (self.model_name, self.prepared.sha256, self.prepared.host_ops)
        estimate = Estimate.of_report(model, memory, options, sram_used, report, prepared.origins)
        bound, how = self.sram_lower_bound(memory)
        estimate = replace(estimate, sram_lower_bound_bytes=bound.bytes,
                           sram_lower_bound_derivation=how)  # fmt: skip
        if chosen is not None:
            estimate = replace(
                estimate, proposals=len(chosen.proposals), chosen_index=chosen.chosen_index
            )
        else:
            estimate = replace(estimate, buffer_weights=config.buffer_weights)
        estimate = replace(
            estimate, narrow_nhwc=config.narrow_nhwc, row_sum_mean=config.row_sum_mean
        )
        return estimate, point, compiled
