"""The final score of a schedule: Vela's performance model (`ethosu.vela.npu_performance`, the
model of Vela's legacy core) over every scheduled NPU operation and each of its stripes.

The input is what codegen produces: per operation, the Vela API operations of its output
stripes (shapes, kernel, block config, encoded weight/bias address ranges) and the memory area
of each tensor. Vela composes the per-op numbers from its internal scheduler objects; we
compose them the same way from the API objects: cycle cost and element access per stripe,
transfer efficiency per area, weight DMA hidden behind the previous op when buffered."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from ethosu.vela.api import NpuBlockOperation
from ethosu.vela.npu_performance import (
    PassCycles,
    make_bandwidth_array,
    make_cycles_array,
    measure_mem2mem_cycles,
    update_summary_cycles,
)
from ethosu.vela.tensor import BandwidthDirection, MemArea, TensorPurpose

from cascader.ethosu.device import get_device
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.perf_query import MEM_AREAS
from cascader.ethosu.vela_cost import StripeCost, copied_weights_cycles, stripe_cost

__all__ = ["OpPerf", "PerfReport", "ScheduledOp", "evaluate"]

AREAS: tuple[str, ...] = tuple(MEM_AREAS)
_ACCESS_CYCLES = {
    "sram": PassCycles.SramAccess,
    "dram": PassCycles.DramAccess,
    "onchip_flash": PassCycles.OnChipFlashAccess,
    "offchip_flash": PassCycles.OffChipFlashAccess,
}


@dataclass(frozen=True)
class ScheduledOp:
    """One NPU operation as scheduled: its stripes (Vela API ops, each with `block_config` set
    and, when it has weights, the encoded `weights`/`biases` address ranges it reads), the area
    of each tensor, and, when the weights are copied before use, the area they are copied from
    (into `const_area`), whether the copy is single- or double-buffered, and per stripe the
    bytes of weights and scale-bias the schedule DMA-copies for it (`weight_copies`; 0 when the
    stripe reads what its buffer already holds). The copies come from the schedule, not from
    the stripes' addresses: single-buffered slices all land at one address. An op with a
    lookup-table activation whose table must first be DMA-copied into SHRAM gives the bytes
    copied and the area they come from (0 when the table is already there).
    `feature_map_copies` are the DMAs that bring parts of the op's input feature maps into
    the buffers its stripes read, a pad's fill of its output, and the scale-bias copies of
    an op that reads its weights in place (source area, destination area, bytes), one per
    DMA the stream issues. `first_copy_hidden` False: the first weight
    copy cannot run beside the op before (its buffer may share that op's bytes), so none of
    it hides under that op. `weight_copy_dmas`, per stripe, the bytes of each DMA of its
    `weight_copies` (weights and scale-bias are two): each pays the source's latency (empty:
    the copies costed as one, as Vela's estimate costs its own). `per_stripe`: an op streamed
    in depth slices is costed slice by slice, as its command stream runs (each slice reads
    the whole IFM), not whole as Vela's estimate costs its own."""

    name: str
    stripes: tuple[NpuBlockOperation, ...]
    ifm_area: str = "sram"
    ofm_area: str = "sram"
    ifm2_area: str | None = None
    const_area: str | None = None
    weight_source_area: str | None = None
    weight_buffering: Literal["single", "double"] = "single"
    weight_copies: tuple[int, ...] = ()
    lut_source_area: str | None = None
    lut_bytes: int = 0
    feature_map_copies: tuple[tuple[str, str, int], ...] = ()
    first_copy_hidden: bool = True
    weight_copy_dmas: tuple[tuple[int, ...], ...] = ()
    per_stripe: bool = False

    def __post_init__(self) -> None:
        if not self.stripes:
            raise ValueError(f"scheduled op {self.name!r} has no stripes")
        copied = [area for copy in self.feature_map_copies for area in copy[:2]]
        for area in (self.ifm_area, self.ofm_area, self.ifm2_area, self.const_area,
                     self.weight_source_area, self.lut_source_area, *copied):  # fmt: skip
            if area is not None and area not in MEM_AREAS:
                raise ValueError(f"unknown memory area {area!r}; areas: {', '.join(AREAS)}")
        if self.stripes[0].weights and self.const_area is None:
            raise ValueError(f"scheduled op {self.name!r} has weights but no const_area")
        if self.weight_source_area is None and self.weight_copies:
            raise ValueError(f"scheduled op {self.name!r} copies weights but no source area")
        if self.weight_source_area is not None and (
            len(self.weight_copies) != len(self.stripes) or self.weight_copies[0] <= 0
        ):
            raise ValueError(
                f"scheduled op {self.name!r}: weight_copies needs one entry per stripe "
                f"({len(self.stripes)}), the first stripe's copy above 0; got {self.weight_copies}"
            )
        if self.lut_bytes and self.lut_source_area is None:
            raise ValueError(f"scheduled op {self.name!r} copies a LUT but has no lut_source_area")


@dataclass(frozen=True)
class OpPerf:
    """Vela's estimate for one scheduled op. `total_cycles` is the largest of the NPU cycles and
    each area's access cycles (the op is bound by whichever is slowest)."""

    name: str
    kind: str
    stripes: int
    npu_cycles: float
    access_cycles: dict[str, float]
    total_cycles: float
    macs: int
    bytes_read: dict[str, float]
    bytes_written: dict[str, float]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "stripes": self.stripes,
            "cycles": self.total_cycles,
            "npu_cycles": self.npu_cycles,
            "access_cycles": dict(self.access_cycles),
            "macs": self.macs,
            "bytes": {a: self.bytes_read[a] + self.bytes_written[a] for a in AREAS},
            "bytes_read": dict(self.bytes_read),
            "bytes_written": dict(self.bytes_written),
        }


@dataclass(frozen=True)
class PerfReport:
    """Per-op rows and their totals; inference time at the system's core clock."""

    ops: tuple[OpPerf, ...]
    core_clock_hz: float
    totals: dict[str, float] = field(init=False)

    def __post_init__(self) -> None:
        def total(get) -> float:
            return float(sum(get(op) for op in self.ops))

        totals = {
            "total_cycles": total(lambda op: op.total_cycles),
            "npu_cycles": total(lambda op: op.npu_cycles),
            "macs": total(lambda op: op.macs),
        }
        for area in AREAS:
            totals[f"{area}_access_cycles"] = total(lambda op, a=area: op.access_cycles[a])
            totals[f"{area}_bytes_read"] = total(lambda op, a=area: op.bytes_read[a])
            totals[f"{area}_bytes_written"] = total(lambda op, a=area: op.bytes_written[a])
        object.__setattr__(self, "totals", totals)

    @property
    def total_cycles(self) -> float:
        return self.totals["total_cycles"]

    @property
    def npu_cycles(self) -> float:
        return self.totals["npu_cycles"]

    @property
    def macs(self) -> int:
        return int(self.totals["macs"])

    @property
    def inference_time_s(self) -> float:
        return self.total_cycles / self.core_clock_hz

    def bytes(self, area: str) -> float:
        """Bytes read plus written in one area per inference."""
        return self.totals[f"{area}_bytes_read"] + self.totals[f"{area}_bytes_written"]

    def to_json(self) -> dict:
        return {
            "total_cycles": self.total_cycles,
            "npu_cycles": self.npu_cycles,
            "macs": self.macs,
            "inference_time_s": self.inference_time_s,
            "access_cycles": {a: self.totals[f"{a}_access_cycles"] for a in AREAS},
            "bytes": {a: self.bytes(a) for a in AREAS},
            "npu_ops": len(self.ops),
            "ops": [op.to_json() for op in self.ops],
        }


def evaluate(ops: Iterable[ScheduledOp], memory: SystemMemory) -> PerfReport:
    """Vela's performance estimate of a schedule, op by op in execution order."""
    get_device(memory.accelerator)  # an unknown accelerator fails here, naming the valid ones
    rows = []
    slack = 0.0  # NPU cycles of the previous op under which a weight DMA can run
    for op in ops:
        row, slack = _evaluate_op(op, memory, slack)
        rows.append(row)
    return PerfReport(tuple(rows), memory.core_clock_hz)


def _evaluate_op(op: ScheduledOp, memory: SystemMemory, prev_slack: float) -> tuple[OpPerf, float]:
    arch = memory.arch
    bws = make_bandwidth_array()  # bytes moved, by area, purpose and direction
    scaled = make_bandwidth_array()  # the same, scaled by each area's transfer efficiency
    copied = op.weight_source_area is not None
    system = memory.system
    # Stripes may share one operation (`codegen.scored_ops`): each is described once.
    described: dict[int, tuple[NpuOpDescription, StripeCost]] = {}
    for stripe in op.stripes:
        if id(stripe) not in described:
            desc = NpuOpDescription.from_npu_op(stripe)
            described[id(stripe)] = (desc, _cost(system, op, desc, stripe))
    descs = [described[id(stripe)][0] for stripe in op.stripes]
    costs = [described[id(stripe)][1] for stripe in op.stripes]
    stripe_cycles = [cost.op_cycles for cost in costs]
    whole = _weight_streamed_whole(op, descs)
    if whole is None:
        units = [((s,), d, c) for s, d, c in zip(op.stripes, descs, costs, strict=True)]
    else:
        units = [(op.stripes, whole, _cost(system, op, whole, op.stripes[0]))]
    op_cycles = 0.0
    macs = 0

    def move(area, purpose, direction, nbytes, efficiency=True, scaled_bytes=None):
        index = (MEM_AREAS[area], purpose, direction)
        bws[index] += nbytes
        scaled[index] += scaled_bytes if efficiency else nbytes

    # Feature-map bytes per (area, direction), summed stripe after stripe as the arrays would
    # sum them (the arrays hold nothing else there), then added to them once.
    feature_maps: dict[tuple[str, BandwidthDirection], list] = {}
    for stripes, desc, cost in units:
        const_read = cost.const_read
        op_cycles += cost.op_cycles
        macs += cost.op_macs
        for area, direction, nbytes, scaled_bytes in cost.feature_maps:
            sums = feature_maps.get((area, direction))
            if sums is None:
                feature_maps[area, direction] = [nbytes, scaled_bytes]
            else:
                sums[0] += nbytes
                sums[1] += scaled_bytes
        weight_bytes = sum(r.length for stripe in stripes for r in stripe.weights)
        bias_bytes = sum(r.length for stripe in stripes for r in stripe.biases)
        if const_read[0] > 0 and weight_bytes:
            # Weight elements fetched, scaled by the encoding ratio (bytes/element).
            per_ofm_channel = desc.kernel[0] * desc.kernel[1]
            if desc.kind == "conv2d":
                per_ofm_channel *= desc.ifm_shape[2]
            weight_reads = const_read[0] * weight_bytes / (per_ofm_channel * desc.ofm_shape[2])
            if copied:
                bws[MEM_AREAS[op.const_area]][TensorPurpose.Weights][BandwidthDirection.Read] += (
                    weight_reads
                )
            else:
                move(op.const_area, TensorPurpose.Weights, BandwidthDirection.Read,
                     weight_reads, efficiency=False)  # fmt: skip
        if const_read[1] > 0 and bias_bytes:
            if copied:
                bws[MEM_AREAS[op.const_area]][TensorPurpose.FSBias][BandwidthDirection.Read] += (
                    bias_bytes
                )
            else:
                move(op.const_area, TensorPurpose.FSBias, BandwidthDirection.Read, bias_bytes,
                     efficiency=False)  # fmt: skip

    for (area, direction), (nbytes, scaled_bytes) in feature_maps.items():
        move(area, TensorPurpose.FeatureMap, direction, nbytes, scaled_bytes=scaled_bytes)
    hiding = prev_slack if op.first_copy_hidden else 0.0
    npu_cycles, slack = _weight_copy_cycles(op, arch, bws, op_cycles, stripe_cycles, hiding)
    npu_cycles += _lut_copy_cycles(op, arch, bws, 0.0 if copied else prev_slack)
    npu_cycles += _feature_map_copy_cycles(op, arch, bws)
    cycles = make_cycles_array()
    cycles[PassCycles.Npu] = npu_cycles
    update_summary_cycles(arch, scaled, cycles)
    read = {a: float(np.sum(bws[MEM_AREAS[a]][:, BandwidthDirection.Read])) for a in AREAS}
    written = {a: float(np.sum(bws[MEM_AREAS[a]][:, BandwidthDirection.Write])) for a in AREAS}
    row = OpPerf(
        name=op.name,
        kind=descs[-1].kind,
        stripes=len(op.stripes),
        npu_cycles=float(cycles[PassCycles.Npu]),
        access_cycles={a: float(cycles[_ACCESS_CYCLES[a]]) for a in AREAS},
        total_cycles=float(cycles[PassCycles.Total]),
        macs=macs,
        bytes_read=read,
        bytes_written=written,
    )
    return row, slack


def _weight_streamed_whole(
    op: ScheduledOp, descs: Sequence[NpuOpDescription]
) -> NpuOpDescription | None:
    """The op as one operation when it streams its weights in OFM-depth slices, one stripe
    each, double-buffered as Vela's scheduler streams them, else None. Vela's estimate
    (`estimate_full_op_performance`) costs such an op whole, from the op's full IFM and OFM
    shapes: the IFM read once and the depth rounded up to the block once, though the hardware
    re-reads the IFM for every slice. The evaluator follows Vela's model there, as it is the
    estimate the schedules are compared with; an op the cascader stripes over its depth into
    one weight buffer is a schedule Vela never makes, and is costed stripe by stripe as its
    command stream runs, as is every op marked `per_stripe`."""
    copies = sum(1 for n in op.weight_copies if n)
    if op.per_stripe or copies < 2 or copies != len(descs) or op.weight_buffering != "double":
        return None
    first = descs[0]
    depthwise = first.kind == "depthwise"

    def spatial(desc: NpuOpDescription) -> NpuOpDescription:
        ifm = desc.ifm_shape if not depthwise else (*desc.ifm_shape[:2], 0)
        return replace(desc, ifm_shape=ifm, ofm_shape=(*desc.ofm_shape[:2], 0))

    if any(spatial(desc) != spatial(first) for desc in descs[1:]):
        return None
    depth = sum(desc.ofm_shape[2] for desc in descs)
    ifm_depth = sum(desc.ifm_shape[2] for desc in descs) if depthwise else first.ifm_shape[2]
    return replace(
        first, ifm_shape=(*first.ifm_shape[:2], ifm_depth), ofm_shape=(*first.ofm_shape[:2], depth)
    )


def _cost(system: tuple, op: ScheduledOp, desc: NpuOpDescription, stripe) -> StripeCost:
    """`stripe_cost` of `desc` run with the block config, areas and second operand of
    `stripe`, one of the op's stripes."""
    ifm2 = stripe.ifm2
    return stripe_cost(
        system, desc, tuple(stripe.block_config), op.ifm_area, op.ofm_area, op.ifm2_area,
        op.const_area if stripe.biases else None,
        ifm2.data_type.size_in_bits() if ifm2 is not None else None,
        ifm2.layout.name if ifm2 is not None else None,
    )  # fmt: skip


def _weight_copy_cycles(
    op: ScheduledOp,
    arch,
    bws: np.ndarray,
    op_cycles: float,
    stripe_cycles: Sequence[float],
    prev_slack: float,
) -> tuple[float, float]:
    """NPU cycles of an op whose weights are DMA-copied before use, and the slack it leaves for
    the next op's copy, as Vela's `estimate_full_op_performance` charges the copies the
    schedule makes. The first slice's copy hides under the previous op's slack; with double
    buffering each later slice's copy runs under the compute of the slice before, so the op
    takes the longer of its compute and its copies; single-buffered, a slice's copy waits for
    the slice before to finish, so every copy but the first adds to the compute. An op
    streamed in several slices leaves its last slice's cycles as slack (Vela's tail), any
    other op its whole compute."""
    transfers = [n for n in op.weight_copies if n]
    if len(transfers) < 2:
        own_slack = op_cycles
    else:
        last = max(i for i, n in enumerate(op.weight_copies) if n)
        own_slack = float(sum(stripe_cycles[last:]))
    if op.weight_source_area is None:
        return op_cycles, own_slack
    source, dest = MEM_AREAS[op.weight_source_area], MEM_AREAS[op.const_area]
    total = sum(transfers)
    bws[source][TensorPurpose.Weights][BandwidthDirection.Read] += total
    bws[dest][TensorPurpose.Weights][BandwidthDirection.Write] += total
    if op.weight_copy_dmas:
        dmas = [[measure_mem2mem_cycles(arch, source, dest, n) for n in s]
                for s in op.weight_copy_dmas]  # fmt: skip
        full_copy = sum(sum(s) for s in dmas)
        first_copy = sum(next(s for s in dmas if s))
    else:
        full_copy = measure_mem2mem_cycles(arch, source, dest, total)
        first_copy = measure_mem2mem_cycles(arch, source, dest, transfers[0])
    double = op.weight_buffering == "double"
    npu = copied_weights_cycles(op_cycles, full_copy, first_copy, prev_slack, own_slack, double)
    return float(npu), own_slack


def _feature_map_copy_cycles(op: ScheduledOp, arch, bws: np.ndarray) -> float:
    """NPU cycles the op waits for the copies of its input feature maps. A copy lands in the
    one buffer the op's stripes read, so it waits for the stripe before to finish and the
    stripe after waits for it: each adds its transfer time (Vela's `measure_mem2mem_cycles`,
    with the source's latency) to the op, the first too (the previous op's slack is left to
    the weight and LUT copies). As for Vela's own DMAs, the bytes count in the bytes moved but
    not in the areas' access cycles."""
    cycles = 0.0
    for source, dest, nbytes in op.feature_map_copies:
        src, dst = MEM_AREAS[source], MEM_AREAS[dest]
        bws[src][TensorPurpose.FeatureMap][BandwidthDirection.Read] += nbytes
        bws[dst][TensorPurpose.FeatureMap][BandwidthDirection.Write] += nbytes
        cycles += measure_mem2mem_cycles(arch, src, dst, nbytes)
    return float(cycles)


def _lut_copy_cycles(op: ScheduledOp, arch, bws: np.ndarray, slack: float) -> float:
    """NPU cycles the DMA of the op's lookup table into SHRAM adds: the part not hidden under
    `slack` cycles of the previous op (none when the weight copy already used them). As in
    Vela, the source read counts in the bytes moved but not in the area's access cycles."""
    if not op.lut_bytes:
        return 0.0
    source = MEM_AREAS[op.lut_source_area]
    bws[source][TensorPurpose.LUT][BandwidthDirection.Read] += op.lut_bytes
    copy = measure_mem2mem_cycles(arch, source, MemArea.Shram, op.lut_bytes)
    return float(max(copy - slack, 0.0))
