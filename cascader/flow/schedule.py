"""A chosen cascader Proposal (or the layer-by-layer "copy-constants" schedule) as an explicit,
deterministic stripe schedule: which op computes which box of its output, in what order, reading
which boxes of its inputs, from which buffers at which addresses.

Lowering follows TVM v0.18's: each plan tiles its output part's output along the stored axes
in axis order (the outer loops of `tile_nd`), and every other part of the plan is computed at
that stripe loop, producing exactly the box its consumer reads (bounds inference: recompute).
Copies of a part's inputs into the cascade region happen at the same loop, before the part
runs, and are skipped while the buffer still holds the same box (a loop-invariant copy, e.g.
the weights of an op striped over its height, moves once); likewise a box a buffer still holds
is not computed again (upscaling ops, which the NPU cannot start mid-pixel, run whole). Beyond
the original, a ROLLING interior tensor striped only along its height is computed row by row
into a circular buffer of as many rows as its consumer reads per stripe (the NPU reads the
wrap through its feature-map tiles), which is what the cascader's cost for ROLLING assumes.

Boxes are NHWC (start, shape) over an op's 4-D feature maps; NHCWB16 tensors keep NHWC boxes,
their addresses follow the brick layout."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

from ethosu.vela.architecture_features import ArchitectureFeatures
from ethosu.vela.hillclimb_allocation import allocate_live_ranges
from ethosu.vela.live_range import LiveRange
from ethosu.vela.npu_performance import (
    _estimate_memory_transfer_efficiency,
    measure_cycle_cost,
    measure_element_access,
    measure_mem2mem_cycles,
)

from cascader.core.graph import CascaderGraph
from cascader.core.part import BufferMode, in_place_input, op_before
from cascader.core.proposal import Proposal
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor_config import TensorConfig, TensorConfigState
from cascader.ethosu.core_split import scale_bias_bytes
from cascader.ethosu.device import get_device, valid_blocks
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.part import EthosuPart
from cascader.ethosu.perf_query import MEM_AREAS, performance_query
from cascader.ethosu.vela_arch import system_arch
from cascader.flow.cascader_graph import _dataflow, build_cascader_graph, npu_op_description
from cascader.flow.lru import LruCache
from cascader.flow.npu_ops import (
    BinaryElementwise,
    Conv2D,
    Identity,
    Layout,
    NpuFunction,
    NpuOp,
    NpuTensor,
    Pooling,
)
from cascader.flow.te import BRICK, SCALE_BIAS_BYTES, as_feature_maps, dilated_kernel

__all__ = [
    "Box",
    "Buffer",
    "Copy",
    "Network",
    "Schedule",
    "ScheduleError",
    "Stripe",
    "layer_by_layer_schedule",
    "network",
    "proposal_schedule",
]

ALIGN = 16  # NPU feature-map and DMA addresses are 16-byte aligned
BLOCK_POLICIES = ("fastest", "cascader")
HILL_CLIMB_ITERATIONS = 1000
REGION_CONSTANTS, REGION_ARENA, REGION_FAST = 0, 1, 2
_READ_BOXES_KEPT = 1 << 16  # (part, output box) -> input boxes per network: tens of MB


class ScheduleError(ValueError):
    """The proposal asks for something this lowering cannot express."""


@dataclass(frozen=True)
class Network:
    """The model's NPU functions, its cascader graph, and per part the NPU op it runs (feature
    maps 4-D, inputs as the graph reads them) and the index of its function."""

    functions: tuple[NpuFunction, ...]
    graph: CascaderGraph
    ops: tuple[NpuOp, ...]
    function_of: tuple[int, ...]

    @cached_property
    def co_written(self) -> dict[int, int]:
        """Tensor -> the tensor it is part of, for the block copies of a concatenation: each
        copy writes its slice of one output, but the graph gives every copy its own output
        tensor (the consumers read the last one's)."""
        groups: dict[tuple[int, str], list[int]] = {}
        for part in self.graph.parts:
            op = self.ops[part.id]
            if isinstance(op, Identity) and op.ofm_offset and op.ofm_fill is None:
                groups.setdefault((self.function_of[part.id], op.ofm.name), []).append(part.id)
        merged = {}
        for pids in groups.values():
            final = self.graph.parts[min(pids)].output.id  # the last copy in model order
            for pid in pids:
                if self.graph.parts[pid].output.id != final:
                    merged[self.graph.parts[pid].output.id] = final
        return merged

    @cached_property
    def _read_boxes(self) -> dict[tuple[int, Box], tuple[tuple[Box, ...], tuple[int, ...]]]:
        return {}

    def input_boxes(self, part: int, ofm: Box) -> tuple[tuple[Box, ...], tuple[int, ...]]:
        """`input_boxes` of the part's op, remembered: a schedule asks for the same boxes
        stripe after stripe, and a sweep's schedules of one network for many of the same."""
        memo = self._read_boxes
        key = (part, ofm)
        found = memo.get(key)
        if found is None:
            if len(memo) >= _READ_BOXES_KEPT:
                memo.clear()
            found = memo[key] = input_boxes(self.ops[part], ofm)
        return found

    def feature_map(self, tid: int) -> NpuTensor:
        """The 4-D feature map behind graph tensor `tid`, as its producer writes it or, for a
        graph input, as its first reader reads it."""
        for part in self.graph.parts:
            op = self.ops[part.id]
            if part.output.id == tid:
                return op.ofm
        for part in reversed(self.graph.parts):
            op = self.ops[part.id]
            for slot, tensor in enumerate(part.inputs[:2]):
                if tensor.id == tid and (slot == 0 or isinstance(op, BinaryElementwise)):
                    return op.ifm2 if slot else op.ifm
        raise ScheduleError(f"tensor {tid} is not a feature map of any op")


def network(functions: Sequence[NpuFunction], accelerator: str) -> Network:
    """The cascader graph of `functions` with the op behind each part (parts are the dataflow's
    ops in reverse order, as build_cascader_graph makes them)."""
    functions = [_vela_layouts(f) for f in functions]
    graph = build_cascader_graph(functions, accelerator)
    flow = list(reversed(_dataflow(functions)))
    return Network(
        tuple(functions),
        graph,
        tuple(as_feature_maps(op) for op, _, _ in flow),
        tuple(key[0] for _, key, _ in flow),
    )


def _vela_layouts(function: NpuFunction) -> NpuFunction:
    """The function as Vela would run it: NHWC wherever Vela's command-stream checks demand it
    (the input of an int32 REDUCE_SUM, softmax's sum; a tensor read or written from a channel
    that is not a multiple of 16, which NHCWB16 cannot address), and unit strides along axes
    with one output (a global pool's stride is meaningless there, but it would shrink the
    block Vela picks)."""
    names = {
        op.ifm.name
        for op in function.ops
        if isinstance(op, Pooling) and op.pool_type == "SUM" and op.ifm.dtype == "int32"
    }
    for op in function.ops:  # brick addresses start at multiples of 16 channels
        if getattr(op, "ifm_offset", ()) and op.ifm_offset[-1] % BRICK:
            names.add(op.ifm.name)
        if getattr(op, "ofm_offset", ()) and op.ofm_offset[-1] % BRICK:
            names.add(op.ofm.name)

    def fix(tensor):
        return replace(tensor, layout=Layout.NHWC) if tensor.name in names else tensor

    ops = []
    for op in function.ops:
        slots = ("ifm", "ifm2", "ofm") if isinstance(op, BinaryElementwise) else ("ifm", "ofm")
        op = replace(op, **{slot: fix(getattr(op, slot)) for slot in slots})
        if isinstance(op, Conv2D | Pooling):
            height, width = (1, 1, 1, *op.ofm.shape)[-3:-1]
            k = op.kernel
            kernel = replace(k, stride_h=1 if height == 1 else k.stride_h,
                             stride_w=1 if width == 1 else k.stride_w)  # fmt: skip
            op = replace(op, kernel=kernel)
        ops.append(op)
    return replace(function, ops=tuple(ops))


@dataclass(frozen=True)
class Box:
    """An NHWC box: start and shape per axis."""

    start: tuple[int, ...]
    shape: tuple[int, ...]

    @cached_property
    def end(self) -> tuple[int, ...]:
        """Kept once computed: the scheduler asks a box for its end again and again."""
        return tuple(s + n for s, n in zip(self.start, self.shape, strict=True))

    @property
    def empty(self) -> bool:
        return any(n <= 0 for n in self.shape)

    def to_json(self) -> dict:
        return {"start": list(self.start), "shape": list(self.shape)}


@dataclass
class Buffer:
    """Where a tensor (or a window of it) lives. `kind`: "tensor" holds the whole tensor,
    "window" the box last written into it (origin = that box's start), "rolling" the last
    `rows` rows of a height-striped tensor, row r at r mod rows. `frame` is the NHWC shape
    the buffer's strides come from. Live from step `first` to step `last`."""

    index: int
    tensor: int
    kind: str
    area: str
    region: int
    frame: tuple[int, ...]
    layout: Layout
    dtype_bytes: int
    size: int
    first: int
    last: int
    address: int = -1
    rows: int = 0

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "tensor": self.tensor,
            "kind": self.kind,
            "area": self.area,
            "region": self.region,
            "address": self.address,
            "size": self.size,
            "frame": list(self.frame),
            "layout": self.layout.value,
        }


@dataclass(frozen=True)
class Copy:
    """A DMA into a cascade-region buffer: a box of a feature map, or the encoded weights or
    scale-bias of output channels [lo, hi) of a part ("weights" / "scale_bias")."""

    tensor: int
    what: str  # feature_map | weights | scale_bias
    box: Box
    source: int  # buffer index (feature maps) or -1 (constants)
    dest: int  # buffer index
    part: int


@dataclass(frozen=True)
class Stripe:
    """One NPU operation: part `part` computes `ofm` (into buffer `ofm_buffer`, whose current
    origin is `ofm_origin`) from `ifms` (per feature-map input: box, buffer, origin), with the
    stripe's own padding (top, left, bottom, right), block config (h, w, c), and for ops with
    weights the output channel range and where weights/biases are read from."""

    part: int
    plan: int
    ofm: Box
    ofm_buffer: int
    ofm_origin: tuple[int, ...]
    ifms: tuple[tuple[Box, int, tuple[int, ...]], ...]
    padding: tuple[int, int, int, int]
    block: tuple[int, int, int]
    channels: tuple[int, int] | None = None
    weights_buffer: int = -1  # -1: read in place from the constants
    bias_buffer: int = -1


Step = Copy | Stripe


@dataclass
class Schedule:
    """The execution order of copies and stripes, the buffers, and per memory area its
    allocated extent. `scratch_bytes` is the fast (cascade) area's extent."""

    network: Network
    memory: SystemMemory
    steps: list[Step]
    buffers: list[Buffer]
    tensor_buffer: dict[int, int]
    extents: dict[str, int] = field(default_factory=dict)

    @property
    def sram_bytes(self) -> int:
        return self.extents.get("sram", 0)

    @property
    def scratch_bytes(self) -> int:
        return self.extents.get(self.memory.roles["cascade"], 0)

    @property
    def arena_bytes(self) -> int:
        return self.extents.get(self.memory.roles["io"], 0)

    def stripes_of(self, part: int) -> list[Stripe]:
        return [s for s in self.steps if isinstance(s, Stripe) and s.part == part]


# ---- boxes: the ops' propagators in NHWC, with clipping and per-stripe padding ---------------


def _full(shape: Sequence[int]) -> Box:
    return Box((0,) * len(shape), tuple(shape))


def _window_axis(start: int, size: int, stride: int, kernel: int, pad: int, extent: int):
    """Input rows [lo, hi) a sliding window reads for outputs [start, start + size), clipped to
    the input, and the padding before/after the clipped range."""
    lo = start * stride - pad
    hi = (start + size - 1) * stride + kernel - pad
    return max(lo, 0), min(hi, extent), max(-lo, 0), max(hi - extent, 0)


def input_boxes(op: NpuOp, ofm: Box) -> tuple[tuple[Box, ...], tuple[int, int, int, int]]:
    """Per feature-map input the box `ofm` reads, and the stripe's padding."""
    n0, h0, w0, c0 = ofm.start
    n, h, w, c = ofm.shape
    if isinstance(op, Conv2D | Pooling):
        if _resamples(op) and (h != op.ofm.shape[1] or w != op.ofm.shape[2]):
            raise ScheduleError(f"{op.name}: a resampling op cannot be striped spatially")
        region = op.ifm_region if isinstance(op, Conv2D) and op.ifm_region else op.ifm.shape
        offset = op.ifm_offset if isinstance(op, Conv2D) and op.ifm_offset else (0, 0, 0, 0)
        kh, kw = dilated_kernel(op)
        k, p = op.kernel, op.padding
        if op.upscale != "NONE":
            ifm = Box(offset, tuple(region))
            return (ifm,), (p.top, p.left, p.bottom, p.right)
        y0, y1, top, bottom = _window_axis(h0, h, k.stride_h, kh, p.top, region[1])
        x0, x1, left, right = _window_axis(w0, w, k.stride_w, kw, p.left, region[2])
        whole_depth = (isinstance(op, Conv2D) and op.kind != "depthwise_conv2d") or (
            isinstance(op, Pooling) and op.pool_type == "SUM"
        )
        d0, d = (0, region[3]) if whole_depth else (c0, c)
        box = Box(
            (n0 + offset[0], y0 + offset[1], x0 + offset[2], d0 + offset[3]),
            (n, y1 - y0, x1 - x0, d),
        )
        return (box,), (top, left, bottom, right)
    if isinstance(op, BinaryElementwise):
        boxes = []
        for tensor in (op.ifm, op.ifm2):
            start = tuple(
                0 if size == 1 else s for size, s in zip(tensor.shape, ofm.start, strict=True)
            )
            shape = tuple(
                1 if size == 1 else s for size, s in zip(tensor.shape, ofm.shape, strict=True)
            )
            boxes.append(Box(start, shape))
        return tuple(boxes), (0, 0, 0, 0)
    if isinstance(op, Identity) and op.ifm.shape != op.ofm.shape:
        inside = copy_box(op, ofm)
        if inside is None:
            return (Box((0, 0, 0, 0), (0, 0, 0, 0)),), (0, 0, 0, 0)
        return (inside[0],), (0, 0, 0, 0)
    return (ofm,), (0, 0, 0, 0)


def copy_box(op: Identity, ofm: Box) -> tuple[Box, Box] | None:
    """For a block copy: the IFM box read and the part of `ofm` written, or None when the
    stripe lies outside the copied region (a pad's border)."""
    region = op.region or op.ifm.shape
    out_offset = op.ofm_offset or (0,) * 4
    in_offset = op.ifm_offset or (0,) * 4
    steps = op.ifm_strides or (1,) * 4
    lo = [max(s, o) for s, o in zip(ofm.start, out_offset, strict=True)]
    hi = [min(e, o + r) for e, o, r in zip(ofm.end, out_offset, region, strict=True)]
    if any(b <= a for a, b in zip(lo, hi, strict=True)):
        return None
    written = Box(tuple(lo), tuple(b - a for a, b in zip(lo, hi, strict=True)))
    start = tuple(
        i + (a - o) * s for i, a, o, s in zip(in_offset, lo, out_offset, steps, strict=True)
    )
    shape = tuple((b - a - 1) * s + 1 for a, b, s in zip(lo, hi, steps, strict=True))
    return Box(start, shape), written


def _nhwc_stripe(config: StripeConfig, layout: Layout, channels: int) -> tuple[int, ...]:
    """A stored-layout stripe shape as NHWC."""
    s = config.shape
    if layout == Layout.NHCWB16:
        return (s[0], s[1], s[3], min(s[2] * BRICK, channels))
    return tuple((1, 1, 1, *s)[-4:])


def _output_boxes(shape: tuple[int, ...], stripe: tuple[int, ...], layout: Layout) -> list[Box]:
    """The output stripes of a plan in TVM's tile_nd loop order: the stored axes in order
    (n, h, w, c for NHWC; n, h, c/16, w for NHCWB16)."""
    stripe = tuple(min(max(s, 1), e) for s, e in zip(stripe, shape, strict=True))
    order = (0, 1, 3, 2) if layout == Layout.NHCWB16 else (0, 1, 2, 3)
    boxes = []
    start = [0, 0, 0, 0]
    # The last axis of `order` varies fastest, as in nested loops.
    for starts in itertools.product(*(range(0, shape[a], stripe[a]) for a in order)):
        for axis, value in zip(order, starts, strict=True):
            start[axis] = value
        boxes.append(
            Box(tuple(start), tuple(min(stripe[a], shape[a] - start[a]) for a in range(4)))
        )
    return boxes


# ---- plans as the scheduler sees them ------------------------------------------------------


@dataclass(frozen=True)
class _Placement:
    """How one tensor is held during a plan: `mode` "tensor" (whole, in `area`), "window" or
    "rolling" (interior, in the cascade area), and for inputs whether it is first copied into
    the cascade area from its `home`."""

    mode: str
    area: str
    copy: bool = False
    home: str = ""


@dataclass(frozen=True)
class _Plan:
    parts: tuple[int, ...]  # execution order: producers first
    output_part: int
    output_stripe: tuple[int, ...]  # NHWC
    stripe_configs: dict[int, StripeConfig]  # per part: its output stripe config
    placements: dict[tuple[int, int], _Placement]  # (part, input slot) -> placement
    outputs: dict[int, _Placement]  # per part: its output's placement
    depth_slices: tuple[int, ...] = ()  # double-buffered weights: OFM depth slice bounds

    def key(self) -> tuple:
        """Everything running the plan reads from it, hashable (the dicts as sorted items)."""
        return (self.parts, self.output_part, self.output_stripe,
                tuple(sorted(self.stripe_configs.items())), tuple(sorted(self.placements.items())),
                tuple(sorted(self.outputs.items())), self.depth_slices)  # fmt: skip


def _plan_from_proposal_plan(net: Network, plan, memory: SystemMemory) -> _Plan:
    graph = net.graph
    ids = sorted(plan.part_ids, reverse=True)
    produced = {graph.parts[i].output.id: i for i in ids}
    interior: dict[int, TensorConfig] = {}
    for config in plan.tensor_configs:
        if config.tensor.id in produced and config.state == TensorConfigState.INTERIOR:
            interior[config.tensor.id] = config
    out_config = plan.output_config
    output_part = produced[out_config.tensor.id]
    cascade = memory.roles["cascade"]
    concatenated = set(net.co_written.values())  # written by several copies: kept whole
    stripe_configs: dict[int, StripeConfig] = {}
    outputs: dict[int, _Placement] = {}
    for i in ids:
        tid = graph.parts[i].output.id
        config = out_config if tid == out_config.tensor.id else interior.get(tid)
        if config is None:
            raise ScheduleError(f"plan {plan.part_ids}: no config for tensor {tid}")
        stripe_configs[i] = config.stripe_configs[0]
        if config.state == TensorConfigState.BOUNDARY or tid in concatenated:
            home = config.home_region if config.state == TensorConfigState.BOUNDARY else cascade
            outputs[i] = _Placement("tensor", home)
        else:
            rolling = config.buffer_mode == BufferMode.ROLLING
            outputs[i] = _Placement("rolling" if rolling else "window", cascade)
    by_tensor: dict[int, list[TensorConfig]] = {}
    for config in plan.tensor_configs:
        if config.tensor.id not in produced:
            by_tensor.setdefault(config.tensor.id, []).append(config)
    placements: dict[tuple[int, int], _Placement] = {}
    for i in ids:
        part = graph.parts[i]
        wanted = part.input_stripe_configs(stripe_configs[i])
        for slot, (tensor, sc) in enumerate(zip(part.inputs, wanted, strict=True)):
            if tensor.id in produced:
                placements[i, slot] = outputs[produced[tensor.id]]
                continue
            candidates = by_tensor.get(tensor.id, [])
            match = next((c for c in candidates if c.stripe_configs[0] == sc), None)
            match = match or (candidates[0] if candidates else None)
            if match is None or not match.copy_tensor:
                home = match.home_region if match is not None else None
                placements[i, slot] = _Placement("tensor", home or "")
            else:
                placements[i, slot] = _Placement(
                    "window", match.copy_region, copy=True, home=match.home_region
                )
    out_layout = net.ops[output_part].ofm.layout
    out_stripe = _nhwc_stripe(
        out_config.stripe_configs[0], out_layout, net.ops[output_part].ofm.shape[3]
    )
    return _Plan(tuple(ids), output_part, out_stripe, stripe_configs, placements, outputs)


def _agreed_homes(net: Network, plans: list[_Plan], builder: _Builder) -> dict[int, str]:
    """One home per whole tensor. Plans choose BOUNDARY homes independently, so a producer
    may home a tensor in the SRAM while a consumer expects it in the arena; the cascader then
    budgets it only where SRAM is said, so it stays in SRAM only when every plan says so."""
    votes: dict[int, set[str]] = {}
    graph = net.graph
    for plan in plans:
        for pid, place in plan.outputs.items():
            if place.mode == "tensor":
                votes.setdefault(builder.root(graph.parts[pid].output.id), set()).add(place.area)
        for (pid, slot), place in plan.placements.items():
            tensor = graph.parts[pid].inputs[slot]
            home = place.home if place.copy else place.area if place.mode == "tensor" else ""
            if home and not tensor.is_constant:
                votes.setdefault(builder.root(tensor.id), set()).add(home)
    return {tid: areas.pop() if len(areas) == 1 else builder.io for tid, areas in votes.items()}


def _plan_order(net: Network, plans: list[_Plan]) -> list[_Plan]:
    """Plans in an order where every plan runs after the plans producing its inputs (Kahn's
    algorithm), function by function (the host runs between them); ties by the highest part
    id, i.e. earliest in the model."""
    graph = net.graph
    owner = {graph.parts[i].output.id: k for k, p in enumerate(plans) for i in p.parts}
    co_writers: dict[int, list[int]] = {}
    for tid, final in net.co_written.items():
        co_writers.setdefault(final, []).append(tid)
    needs = []
    for k, plan in enumerate(plans):
        inside = {graph.parts[i].output.id for i in plan.parts}
        deps = {
            owner[t.id]
            for i in plan.parts
            for t in graph.parts[i].inputs
            if t.id in owner and t.id not in inside
        }
        # the copy that completes a concatenation runs after the other copies into it
        for i in plan.parts:
            deps |= {owner[t] for t in co_writers.get(graph.parts[i].output.id, ())}
        needs.append(deps - {k})
    done: set[int] = set()
    order = []
    while len(order) < len(plans):
        ready = [k for k in range(len(plans)) if k not in done and needs[k] <= done]
        if not ready:
            raise ScheduleError("the proposal's plans depend on each other in a cycle")
        k = min(ready, key=lambda k: (net.function_of[plans[k].parts[0]], -max(plans[k].parts)))
        done.add(k)
        order.append(plans[k])
    return order


# ---- plans replayed: what a plan adds to a schedule, recorded once -------------------------


@dataclass(frozen=True)
class _Whole:
    """A whole-tensor buffer a plan uses: the tensor, the area it asks for it in, and the step
    it first uses it at."""

    tensor: int
    area: str
    first: int


@dataclass(frozen=True)
class _PlanTrace:
    """What running a plan added to a schedule, with steps counted from the plan's first: per
    buffer slot (in the order the plan made or first used them) its own buffer or the whole
    tensor it used, the last step each whole tensor was used at, the steps with slots in
    place of buffer indices, its parts' block configs, and the encoded weight sizes its copy
    buffers were sized with."""

    net: Network
    slots: tuple[Buffer | _Whole, ...]
    whole_last: tuple[tuple[int, int], ...]
    steps: tuple[Step, ...]
    blocks: dict[int, tuple[int, int, int]]
    sizes: dict[tuple[int, int, int, int], int]

    def sizes_agree(self, encoded_size: EncodedSize) -> bool:
        return all(encoded_size(*args) == n for args, n in self.sizes.items())


# Plan records by (plan, network, system, roles, block policy, homes of its tensors): a
# sweep's proposals share most of their plans, also those of different cascader runs.
_TRACES = LruCache(4096)


def _with_buffers(step: Step, index_of: dict[int, int], plan: int) -> Step:
    """The step with its buffer references mapped through `index_of` (-1, none, stays); a
    stripe also moves to plan `plan` (-1: keep)."""
    if isinstance(step, Copy):
        return Copy(step.tensor, step.what, step.box, index_of[step.source],
                    index_of[step.dest], step.part)  # fmt: skip
    return Stripe(
        step.part,
        step.plan if plan < 0 else plan,
        step.ofm,
        index_of[step.ofm_buffer],
        step.ofm_origin,
        tuple((box, index_of[buf], origin) for box, buf, origin in step.ifms),
        step.padding,
        step.block,
        step.channels,
        index_of[step.weights_buffer],
        index_of[step.bias_buffer],
    )


# ---- the scheduler -------------------------------------------------------------------------


EncodedSize = Callable[[int, int, int, int], int]  # (part, lo, hi, block depth) -> bytes


class _Builder:
    def __init__(
        self, net: Network, memory: SystemMemory, encoded_size: EncodedSize, blocks: str
    ) -> None:
        if blocks not in BLOCK_POLICIES:
            raise ValueError(f"unknown block policy {blocks!r}; valid: {', '.join(BLOCK_POLICIES)}")
        self.blocks = blocks
        self.net = net
        self.memory = memory
        self.system = (memory.accelerator, memory.system_config, memory.memory_mode,
                       memory.config_path)  # fmt: skip
        self.encoded_size = encoded_size
        # While a plan is recorded (`_recorded`): its buffer slots, the slot of each whole
        # tensor it uses, and the encoded weight sizes it asks for.
        self._events: list[int | _Whole] | None = None
        self._whole_slots: dict[int, int] = {}
        self._sizes: dict[tuple[int, int, int, int], int] = {}
        self.steps: list[Step] = []
        self.buffers: list[Buffer] = []
        self.tensor_buffer: dict[int, int] = {}
        self.io = memory.roles["io"]
        self.cascade = memory.roles["cascade"]
        self.constants = memory.roles["constants"]
        graph = net.graph
        self.produced_by = {p.output.id: p.id for p in graph.parts}
        self.graph_io = {t.id for t in graph.input_tensors if not t.is_constant} | {
            t.id for t in graph.output_tensors
        }
        self.alias: dict[int, int] = {}
        self._blocks: dict[int, tuple[int, int, int]] = {}
        self.homes: dict[int, str] = {}  # tensor -> the area its whole-tensor buffer is in
        for part in graph.parts:
            if part.in_line:  # a reshape reads and writes the same bytes
                self.alias[part.output.id] = part.inputs[0].id
        self.co_written = net.co_written
        self.alias.update(self.co_written)

    def region_of(self, area: str) -> int:
        return REGION_ARENA if area == self.io else REGION_FAST

    def root(self, tid: int) -> int:
        while tid in self.alias:
            tid = self.alias[tid]
        return tid

    def tensor_shape(self, tid: int) -> tuple[tuple[int, ...], Layout, int]:
        """NHWC shape, layout and element bytes of a graph tensor."""
        t = self.net.feature_map(tid)
        return t.shape, t.layout, self.net.graph.tensors[tid].dtype_bytes

    def new_buffer(self, tid: int, kind: str, area: str, frame: tuple[int, ...], rows: int = 0,
                   size: int | None = None) -> int:  # fmt: skip
        _, layout, nbytes = self.tensor_shape(tid) if tid >= 0 else (frame, Layout.NHWC, 1)
        if size is None:
            size = feature_map_bytes(frame, layout, nbytes)
        index = len(self.buffers)
        step = len(self.steps)
        self.buffers.append(
            Buffer(
                index,
                tid,
                kind,
                area,
                self.region_of(area),
                frame,
                layout,
                nbytes,
                size=_align(size),
                first=step,
                last=step,
                rows=rows,
            )
        )
        if self._events is not None and kind != "tensor":
            self._events.append(index)
        return index

    def touch(self, index: int) -> None:
        """The buffer is used by the step about to be appended."""
        self.buffers[index].last = len(self.steps)

    def whole_tensor(self, tid: int, area: str) -> int:
        """The buffer holding all of tensor `tid` (made on first use)."""
        tid = self.root(tid)
        if self._events is not None and tid not in self._whole_slots:
            self._whole_slots[tid] = len(self._events)
            self._events.append(_Whole(tid, area, len(self.steps)))
        found = self.tensor_buffer.get(tid)
        if found is None:
            shape, _, _ = self.tensor_shape(tid)
            found = self.new_buffer(tid, "tensor", self.homes.get(tid, area or self.io), shape)
            self.tensor_buffer[tid] = found
        self.touch(found)
        return found

    def run_plan(self, plan: _Plan, plan_index: int, recorded: bool = False) -> None:
        """Append the plan's steps and buffers. With `recorded` (plans of the cascader), a
        plan equal to one that ran before on this network and system, with the same homes
        for its tensors and the same weight sizes, is replayed from its record: a sweep's
        proposals share most of their plans, within one cascader run and across runs."""
        if not recorded:
            self._run_plan(plan, plan_index)
            return
        parts = self.net.graph.parts
        roots = tuple(
            self.root(t.id) for pid in plan.parts for t in (*parts[pid].inputs, parts[pid].output)
        )
        key = (plan.key(), id(self.net), self.system, tuple(self.memory.roles.items()),
               self.blocks, roots, tuple(self.homes.get(r) for r in roots))  # fmt: skip
        trace = _TRACES.lookup(key)
        if trace is not None and trace.net is self.net and trace.sizes_agree(self.encoded_size):
            self._replay(trace, plan_index)
            return
        trace = self._recorded(plan, plan_index)
        if trace is not None:
            _TRACES.keep(key, trace)

    def _recorded(self, plan: _Plan, plan_index: int) -> _PlanTrace | None:
        """Run the plan and return its record relative to where it started (None when a step
        reads a buffer the plan neither made nor took as a whole tensor)."""
        base = len(self.steps)
        self._events, self._whole_slots, self._sizes = [], {}, {}
        try:
            self._run_plan(plan, plan_index)
            events, sizes = self._events, self._sizes
        finally:
            self._events = None
        slots: list[Buffer | _Whole] = []
        slot_of = {-1: -1}
        whole_last = []
        for slot, event in enumerate(events):
            if isinstance(event, _Whole):
                index = self.tensor_buffer[event.tensor]
                whole_last.append((slot, self.buffers[index].last - base))
                slots.append(replace(event, first=event.first - base))
            else:
                index = event
                buf = self.buffers[index]
                slots.append(replace(buf, first=buf.first - base, last=buf.last - base))
            slot_of[index] = slot
        try:
            steps = tuple(_with_buffers(step, slot_of, -1) for step in self.steps[base:])
        except KeyError:
            return None
        blocks = {pid: self._blocks[pid] for pid in plan.parts if pid in self._blocks}
        return _PlanTrace(self.net, tuple(slots), tuple(whole_last), steps, blocks, sizes)

    def _replay(self, trace: _PlanTrace, plan_index: int) -> None:
        """Append a recorded plan's buffers and steps as if it had run here."""
        base = len(self.steps)
        index_of = {-1: -1}
        for slot, made in enumerate(trace.slots):
            if isinstance(made, _Whole):
                index = self.tensor_buffer.get(made.tensor)
                if index is None:  # first used here: made at its first step
                    index = self.whole_tensor(made.tensor, made.area)
                    self.buffers[index].first = base + made.first
            else:
                index = len(self.buffers)
                self.buffers.append(
                    replace(made, index=index, first=base + made.first, last=base + made.last)
                )
            index_of[slot] = index
        for slot, last in trace.whole_last:
            self.buffers[index_of[slot]].last = base + last
        self.steps.extend(_with_buffers(step, index_of, plan_index) for step in trace.steps)
        self._blocks.update(trace.blocks)

    def _run_plan(self, plan: _Plan, plan_index: int) -> None:
        net, graph = self.net, self.net.graph
        out_op = net.ops[plan.output_part]
        stripe = plan.output_stripe
        bricked = any(
            t.layout == Layout.NHCWB16 for pid in plan.parts for t in _feature_maps(net.ops[pid])
        )
        if bricked and stripe[3] % BRICK:  # NHCWB16 is only addressable from whole bricks
            stripe = (*stripe[:3], -(-stripe[3] // BRICK) * BRICK)
        if plan.depth_slices:
            n, h, w, _ = out_op.ofm.shape
            slices = itertools.pairwise(plan.depth_slices)
            boxes = [Box((0, 0, 0, lo), (n, h, w, hi - lo)) for lo, hi in slices]
        else:
            boxes = _output_boxes(out_op.ofm.shape, stripe, out_op.ofm.layout)
        window: dict[int, int] = {}  # part -> buffer of its interior output
        rolled: dict[int, int] = {}  # part -> rows computed so far (rolling outputs)
        copies: dict[tuple[int, int], int] = {}  # (part, slot) -> copy buffer
        alternates: dict[tuple[int, int], int] = {}  # (part, slot) -> second weight buffer
        held: dict[int, Box] = {}  # copy buffer -> box it holds
        origins: dict[int, tuple[int, ...]] = {}  # window buffer -> origin of what it holds
        computed: dict[int, set[Box]] = {}  # part -> boxes its buffer still holds
        boxes, required_by_stripe = self._leanest_grid(plan, boxes)
        # Blocks are chosen for the largest box a part is asked for; untrimmed, a rolling
        # part's consumers ask it for their whole window, which picks blocks that suit the
        # rows it computes per stripe better than its (largest) first stripe does.
        self._choose_blocks(plan, [self._requirements(plan, box) for box in boxes])
        self._size_plan_buffers(plan, required_by_stripe, window, copies, alternates)
        for index, required in enumerate(required_by_stripe):
            for pid in plan.parts:
                part = graph.parts[pid]
                if part.in_line:
                    continue
                op = net.ops[pid]
                ofm = required.get(pid)
                if ofm is None:  # its consumers roll and need no new rows of it
                    continue
                mode = plan.outputs[pid].mode
                if mode == "rolling":
                    done = rolled.get(pid, 0)
                    new_start = max(ofm.start[1], done)
                    end = ofm.end[1]
                    rolled[pid] = max(done, end)
                    ofm = Box(
                        (ofm.start[0], new_start, *ofm.start[2:]),
                        (ofm.shape[0], end - new_start, *ofm.shape[2:]),
                    )
                if ofm.empty or ofm in computed.get(pid, ()):
                    continue
                holds = computed.setdefault(pid, set())
                if mode == "window":
                    holds.clear()
                holds.add(ofm)
                ifms, padding = net.input_boxes(pid, ofm)
                ifm_refs = []
                for slot, ifm_box in enumerate(ifms):
                    tensor = part.inputs[slot]
                    if _scalar(op, slot):
                        ifm_refs.append((ifm_box, -1, (0, 0, 0, 0)))
                        continue
                    place = plan.placements[pid, slot]
                    producer = self.produced_by.get(self.root(tensor.id))
                    if producer in window:
                        buf = window[producer]
                        self.touch(buf)
                        origin = origins.get(buf, (0, 0, 0, 0))
                    elif place.copy:
                        buf = copies[pid, slot]
                        source = self.whole_tensor(tensor.id, "")
                        if held.get(buf) != ifm_box:
                            self.steps.append(
                                Copy(tensor.id, "feature_map", ifm_box, source, buf, pid)
                            )
                            held[buf] = ifm_box
                        self.touch(buf)
                        origin = ifm_box.start
                    else:
                        buf = self.whole_tensor(tensor.id, place.area)
                        origin = (0, 0, 0, 0)
                    ifm_refs.append((ifm_box, buf, origin))
                weights_buf = bias_buf = -1
                channels = None
                block = self.block_of(pid)
                if isinstance(op, Conv2D):
                    channels = (ofm.start[3], ofm.end[3])
                    depth_box = Box((channels[0],), (channels[1] - channels[0],))
                    # Double-buffered weights: slice k+1 is copied into the other buffer
                    # before slice k runs, so its DMA overlaps slice k's compute.
                    loads = [(index, depth_box)]
                    if alternates and index + 1 < len(boxes):
                        upcoming = boxes[index + 1]
                        loads.append((index + 1, Box((upcoming.start[3],), (upcoming.shape[3],))))
                    for k, box in loads:
                        for slot, what in ((1, "weights"), (2, "scale_bias")):
                            if not plan.placements[pid, slot].copy:
                                continue
                            odd = bool(alternates) and k % 2 == 1
                            buf = alternates[pid, slot] if odd else copies[pid, slot]
                            if held.get(buf) != box:
                                tid = part.inputs[slot].id
                                self.steps.append(Copy(tid, what, box, -1, buf, pid))
                                held[buf] = box
                            self.touch(buf)
                            if k != index:
                                continue
                            if what == "weights":
                                weights_buf = buf
                            else:
                                bias_buf = buf
                if pid in window:
                    out_buf = window[pid]
                    if mode == "window":
                        origins[out_buf] = ofm.start
                    out_origin = origins.get(out_buf, (0, 0, 0, 0))
                else:
                    out_buf = self.whole_tensor(part.output.id, plan.outputs[pid].area)
                    out_origin = (0, 0, 0, 0)
                self.touch(out_buf)
                # The copies above were appended after the inputs were touched: the inputs
                # must stay live through the stripe itself, not just its copies, or the
                # allocator may place the output over them.
                for _, buf, _ in ifm_refs:
                    if buf >= 0:
                        self.touch(buf)
                self.steps.append(
                    Stripe(
                        pid,
                        plan_index,
                        ofm,
                        out_buf,
                        out_origin,
                        tuple(ifm_refs),
                        padding=padding,
                        block=block,
                        channels=channels,
                        weights_buffer=weights_buf,
                        bias_buffer=bias_buf,
                    )
                )
        live = [*window.values(), *copies.values(), *alternates.values()]
        for buf in live:  # live to the plan's last step
            self.buffers[buf].last = max(self.buffers[buf].last, len(self.steps) - 1)

    def _leanest_grid(
        self, plan: _Plan, boxes: list[Box]
    ) -> tuple[list[Box], list[dict[int, Box]]]:
        """The output stripes and each stripe's requirements. In a plan striped down the
        height whose parts roll, the first stripe computes every row its consumers' windows
        reach while later stripes compute only new rows, so the first stripe can set the
        rolling buffers' size. A shorter first stripe (the grid after it shifts with it) can
        trim them: the grid whose interior buffers take the fewest bytes wins, then the one
        with the fewest stripes, then the cascader's own (each stripe costs some cycles)."""
        required = self._plan_requirements(plan, boxes)
        full = self.net.ops[plan.output_part].ofm.shape
        height = boxes[0].shape[1]
        striped_by_height = all(b.shape[a] == full[a] for b in boxes for a in (0, 2, 3))
        if plan.depth_slices or len(boxes) < 2 or height < 2 or not striped_by_height:
            return boxes, required
        if not any(plan.outputs[pid].mode == "rolling" for pid in plan.parts):
            return boxes, required
        best = (self._interior_bytes(plan, required), len(boxes), -height)
        chosen = boxes, required
        for first in range(1, height):
            starts = [0, *range(first, full[1], height)]
            ends = [*starts[1:], full[1]]
            grid = [_rows_from(_full(full), lo, hi) for lo, hi in zip(starts, ends, strict=True)]
            needs = self._plan_requirements(plan, grid)
            cost = (self._interior_bytes(plan, needs), len(grid), -first)
            if cost < best:
                best, chosen = cost, (grid, needs)
        return chosen

    def _interior_bytes(self, plan: _Plan, required: list[dict[int, Box]]) -> int:
        """The bytes of the plan's interior buffers, framed as `_size_plan_buffers` does."""
        graph = self.net.graph
        total = 0
        for pid in plan.parts:
            if plan.outputs[pid].mode == "tensor" or graph.parts[pid].in_line:
                continue
            frame = _max_shape([r[pid] for r in required if pid in r])
            _, layout, nbytes = self.tensor_shape(graph.parts[pid].output.id)
            total += _align(feature_map_bytes(frame, layout, nbytes))
        return total

    def _plan_requirements(self, plan: _Plan, boxes: list[Box]) -> list[dict[int, Box]]:
        """Per output stripe, the box of each part's output it needs. A part that rolls
        computes only the rows it has not computed before, so its inputs are asked for what
        those rows read, not what all the rows it holds read: its producers' buffers then
        hold no more rows than a stripe uses (the run loop trims the same way)."""
        required = [self._requirements(plan, box) for box in boxes]
        rolling = frozenset(
            pid
            for pid in plan.parts
            if plan.outputs[pid].mode == "rolling"
            and not self.net.graph.parts[pid].in_line
            and _rolls(self.net.ops[pid].ofm.shape, [r[pid] for r in required if pid in r])
        )
        if not rolling:
            return required
        rolled: dict[int, int] = {}
        trimmed = [self._requirements(plan, box, rolling, rolled) for box in boxes]
        # Every part trimmed for must still roll, or the run loop would compute it whole.
        for pid in rolling:
            if not _rolls(self.net.ops[pid].ofm.shape, [r[pid] for r in trimmed if pid in r]):
                return required
        return trimmed

    def _requirements(
        self,
        plan: _Plan,
        box: Box,
        rolling: frozenset[int] = frozenset(),
        rolled: dict[int, int] | None = None,
    ) -> dict[int, Box]:
        """Per part of the plan, the box of its output this output stripe needs; for the
        `rolling` parts, their inputs are asked only for the rows past `rolled` (rows each
        has computed so far, advanced here)."""
        graph, net = self.net.graph, self.net
        need: dict[int, Box] = {plan.output_part: box}
        inside = set(plan.parts)
        for pid in reversed(plan.parts):  # consumers first
            if pid not in need:
                continue
            if _resamples(net.ops[pid]):
                need[pid] = _full(net.ops[pid].ofm.shape)
            part = graph.parts[pid]
            computes = need[pid]
            if pid in rolling and rolled is not None:
                done = rolled.get(pid, 0)
                rolled[pid] = max(done, computes.end[1])
                computes = _rows_from(computes, done)
                if computes.empty:
                    continue
            if part.in_line:
                boxes = (_full(net.ops[pid].ifm.shape),)
            else:
                boxes, _ = net.input_boxes(pid, computes)
            for slot, ifm_box in enumerate(boxes):
                tensor = part.inputs[slot]
                producer = self.produced_by.get(tensor.id)
                if producer in inside and not _scalar(net.ops[pid], slot):
                    need[producer] = _union(need.get(producer), ifm_box)
        return need

    def _size_plan_buffers(self, plan, required_by_stripe, window, copies, alternates) -> None:
        """Make the plan's interior and copy buffers, each framed to the largest box it holds;
        double-buffered weights get two buffers, for the even and the odd depth slices."""
        graph, net = self.net.graph, self.net
        for pid in plan.parts:
            mode = plan.outputs[pid].mode
            if mode == "tensor" or graph.parts[pid].in_line:
                continue
            boxes = [r[pid] for r in required_by_stripe if pid in r]
            frame = _max_shape(boxes)
            full = net.ops[pid].ofm.shape
            if mode == "rolling" and not _rolls(full, boxes):
                mode = "window"  # striped across more than the height: no circular buffer
                plan.outputs[pid] = replace(plan.outputs[pid], mode="window")
            rows = frame[1] if mode == "rolling" else 0
            window[pid] = self.new_buffer(graph.parts[pid].output.id, mode, self.cascade, frame,
                                          rows=rows)  # fmt: skip
        for pid in plan.parts:
            part = graph.parts[pid]
            if part.in_line:
                continue
            op = net.ops[pid]
            boxes = [net.input_boxes(pid, r[pid])[0] for r in required_by_stripe if pid in r]
            for slot, tensor in enumerate(part.inputs):
                place = plan.placements[pid, slot]
                if not place.copy or _scalar(op, slot):
                    continue
                if slot < len(boxes[0]):
                    frame = _max_shape([b[slot] for b in boxes])
                    copies[pid, slot] = self.new_buffer(tensor.id, "window", self.cascade, frame)
                    continue
                ofm_boxes = [r[pid] for r in required_by_stripe if pid in r]
                parities = (ofm_boxes[::2], ofm_boxes[1::2]) if plan.depth_slices else (ofm_boxes,)
                for target, group in zip((copies, alternates), parities, strict=False):
                    size = self._constant_bytes(pid, slot, group)
                    target[pid, slot] = self.new_buffer(-1, "window", self.cascade, (size,),
                                                        size=size)  # fmt: skip
                    self.buffers[target[pid, slot]].tensor = tensor.id

    def _constant_bytes(self, pid: int, slot: int, ofm_boxes: list[Box]) -> int:
        """The largest encoded weights (slot 1) or scale-bias (slot 2) of any stripe's output
        channel range (a multi-core NPU aligns each core's scale-bias stream)."""
        depth = self.block_of(pid)[2]
        sizes = []
        for box in dict.fromkeys((b.start[3], b.end[3]) for b in ofm_boxes):
            lo, hi = box
            if slot == 1:
                size = self.encoded_size(pid, lo, hi, depth)
                if self._events is not None:
                    self._sizes[pid, lo, hi, depth] = size
                sizes.append(size)
            else:
                sizes.append(scale_bias_bytes(self.memory.accelerator, lo, hi, depth))
        return max(sizes)

    def _choose_blocks(self, plan: _Plan, required_by_stripe: list[dict[int, Box]]) -> None:
        """One block config per part, for all its stripes: the fastest under Vela's model for
        the part's largest stripe ("fastest"), or the one the cascader's cost assumed
        ("cascader")."""
        for pid in plan.parts:
            part = self.net.graph.parts[pid]
            if part.in_line:
                continue
            if not isinstance(part, EthosuPart):
                raise ScheduleError(f"part {pid} is not an NPU op")
            op = self.net.ops[pid]
            if self.blocks == "cascader":
                shape = part.block_config(plan.stripe_configs[pid]).output_shape
                self._blocks[pid] = _vela_block(op, shape, self.memory.accelerator)
                continue
            boxes = [r[pid] for r in required_by_stripe if pid in r]
            largest = max(boxes, key=lambda b: (math.prod(b.shape), b.shape))
            if plan.depth_slices:  # Vela picks the block for the whole op, then slices it
                largest = _full(op.ofm.shape)
            ifms, _ = self.net.input_boxes(pid, largest)
            if largest.shape == tuple(op.ofm.shape):  # whole: as Vela sees the op
                ifms = tuple(_full(t.shape) for t in _feature_inputs(op))
            areas = (
                self._input_area(plan, pid),
                self._output_area(plan, pid),
                self._weights_area(plan, pid),
            )
            self._blocks[pid] = fastest_block(self.memory, op, largest, ifms, areas)

    def _input_area(self, plan: _Plan, pid: int) -> str:
        """Where the part's IFM will be read from."""
        place = plan.placements[pid, 0]
        if place.mode != "tensor" or place.copy:
            return self.cascade
        tid = self.root(self.net.graph.parts[pid].inputs[0].id)
        return self.homes.get(tid, place.area or self.io)

    def _weights_area(self, plan: _Plan, pid: int) -> str:
        """Where the NPU reads the part's weights: their copy, or the constants in place."""
        if not isinstance(self.net.ops[pid], Conv2D) or plan.placements[pid, 1].copy:
            return self.cascade
        return self.constants

    def _output_area(self, plan: _Plan, pid: int) -> str:
        place = plan.outputs[pid]
        if place.mode != "tensor":
            return self.cascade
        tid = self.root(self.net.graph.parts[pid].output.id)
        return self.homes.get(tid, place.area or self.io)

    def double_buffered(self, plan: _Plan) -> _Plan:
        """A plan of one convolution computed in one stripe that copies its weights whole,
        with its weights double-buffered in output-depth slices where Vela's scheduler would
        (`weight_depth_slices`): all but the first slice's copy then run under the op's own
        compute instead of before it. Only when the whole copy cannot hide under the op
        before (taken, as the cascader's cost takes it, to be the producer of the input); the
        two slice buffers fit in the bytes the whole copy took, else (only then: a larger
        limit makes coarser slices) in those and the alignment of the second buffer's
        weights and scale-bias, which a split at whole blocks adds to the encoded bytes."""
        pid = plan.output_part
        op = self.net.ops[pid]
        if (
            len(plan.parts) != 1
            or self.blocks != "fastest"
            or not isinstance(op, Conv2D)
            or op.kind == "fully_connected"
            or not plan.placements[pid, 1].copy
            or tuple(plan.output_stripe) != tuple(op.ofm.shape)
        ):
            return plan
        areas = (self._input_area(plan, pid), self._output_area(plan, pid), self.cascade)
        block = whole_op_block(self.memory, op, areas)
        sizes = _buffer_bytes(self.memory, self.encoded_size, pid, block[2])
        whole = sizes(0, op.ofm.shape[3])
        slack = self._producer_cycles(pid)
        source = MEM_AREAS[self.constants]
        transfer = measure_mem2mem_cycles(_system_arch(self.system), source,
                                          MEM_AREAS[self.cascade], whole)  # fmt: skip
        if transfer <= slack:
            return plan
        for limit in (whole, whole + 2 * ALIGN):
            bounds = weight_depth_slices(op, self.memory, sizes, block, slack, limit)
            slices = _even_slices(op, bounds, sizes, limit)
            if slices:
                return replace(plan, depth_slices=slices)
        return plan

    def _producer_cycles(self, pid: int) -> float:
        """Compute cycles of the op that produces the part's first input (whole, with its
        fastest block), 0 for a graph input."""
        producer = op_before(self.net.graph.parts[pid])
        if producer is None:
            return 0.0
        op = self.net.ops[producer.id]
        block = whole_op_block(self.memory, op)
        return _op_cycles(self.memory, op, block, op.ofm.shape[3])

    def block_of(self, pid: int) -> tuple[int, int, int]:
        """The (h, w, c) block config of every stripe of a part."""
        return self._blocks[pid]

    def pin_io(self) -> None:
        """A function's inputs are written by the host before its first step and its outputs
        read after its last, so they stay live across the whole function."""
        span: dict[int, tuple[int, int]] = {}
        for index, step in enumerate(self.steps):
            function = self.net.function_of[step.part]
            first, _ = span.get(function, (index, index))
            span[function] = (first, index)
        graph = self.net.graph
        for tensor in [*graph.input_tensors, *graph.output_tensors]:
            tid = self.root(tensor.id)
            if tensor.is_constant or tid not in self.tensor_buffer:
                continue
            buf = self.buffers[self.tensor_buffer[tid]]
            parts = [p.id for p in tensor.consumers] + [p.id for p in tensor.producers]
            for function in {self.net.function_of[pid] for pid in parts}:
                first, last = span.get(function, (buf.first, buf.last))
                if tensor in graph.input_tensors:
                    buf.first = min(buf.first, first)
                if tensor in graph.output_tensors:
                    buf.last = max(buf.last, last)

    def allocate(self) -> dict[str, int]:
        """Addresses per area, each buffer at the lowest aligned address that overlaps no
        buffer live at the same time: first-fit in a few orders (largest first, longest-lived
        first, first-used first) and, when none reaches the live peak, Vela's hill-climb
        allocator from there; the smallest extent wins. Returns each area's extent."""
        extents: dict[str, int] = {}
        over = self.written_over()
        members: dict[int, list[Buffer]] = {}
        for buf in self.buffers:
            base = buf.index
            while base in over:
                base = over[base]
            members.setdefault(base, []).append(buf)
        by_area: dict[str, list[Buffer]] = {}
        for base, group in members.items():
            # A buffer written over another is placed with it, as one live range.
            first, last = min(b.first for b in group), max(b.last for b in group)
            joined = replace(self.buffers[base], first=first, last=last)
            by_area.setdefault(joined.area, []).append(joined)
        orders = (
            lambda b: (-b.size, b.first, b.index),
            lambda b: (-(b.last - b.first + 1) * b.size, b.index),
            lambda b: (b.first, -b.size, b.index),
        )
        for area, buffers in by_area.items():
            buffers = sorted(buffers, key=lambda b: b.index)
            candidates = []
            for order in orders:
                placed = dict((b.index, a) for b, a in _first_fit(sorted(buffers, key=order)))
                candidates.append([placed[b.index] for b in buffers])
            if _extent(buffers, min(candidates, key=lambda c: _extent(buffers, c))) > _peak(
                buffers
            ):
                candidates.append(_hill_climb(buffers, _peak(buffers)))
            best = min(candidates, key=lambda c: _extent(buffers, c))
            for joined, address in zip(buffers, best, strict=True):
                for buf in members[joined.index]:
                    buf.address = address
            extents[area] = _extent(buffers, best)
        return extents

    def written_over(self) -> dict[int, int]:
        """Output buffer -> the input buffer it is written over: an elementwise op's whole
        output over a whole input of the same bytes and layout in the same area that only
        this op reads (`core.part.in_place_input`) and that is complete before the op's
        first stripe, as Vela's allocator places them. Each stripe reads its input box
        before writing the same box of the output, and nothing writes the input after."""
        parts = self.net.graph.parts
        shared = set(self.alias.values())  # tensors whose buffer others write too
        over: dict[int, int] = {}
        last_write: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            last_write[step.ofm_buffer if isinstance(step, Stripe) else step.dest] = index
        seen: set[int] = set()  # outputs decided at their first stripe
        for index, step in enumerate(self.steps):
            if not isinstance(step, Stripe) or step.ofm_buffer in seen:
                continue
            seen.add(step.ofm_buffer)
            part = parts[step.part]
            slot = in_place_input(part)
            if slot < 0:
                continue
            out, source = self.buffers[step.ofm_buffer], self.buffers[step.ifms[slot][1]]
            if (
                out.kind == source.kind == "tensor"
                and source.tensor == part.inputs[slot].id  # its own buffer, not an alias's
                and out.tensor == part.output.id
                and out.tensor not in shared
                and source.tensor not in self.graph_io
                and (out.area, out.size, out.layout) == (source.area, source.size, source.layout)
                and last_write.get(source.index, -1) < index
            ):
                over[out.index] = source.index
        return over


def _extent(buffers: list[Buffer], addresses: list[int]) -> int:
    return max((a + b.size for b, a in zip(buffers, addresses, strict=True)), default=0)


def _peak(buffers: list[Buffer]) -> int:
    """The most bytes live at once: no allocation can be smaller."""
    events: dict[int, int] = {}
    for b in buffers:
        events[b.first] = events.get(b.first, 0) + b.size
        events[b.last + 1] = events.get(b.last + 1, 0) - b.size
    live = peak = 0
    for step in sorted(events):
        live += events[step]
        peak = max(peak, live)
    return peak


def _hill_climb(buffers: list[Buffer], target: int) -> list[int]:
    """Vela's search-based allocator, stopping at `target` bytes (deterministic: it seeds
    its own generator)."""
    ranges = []
    for buf in buffers:
        lr = LiveRange(None, ALIGN)
        lr.start_time, lr.end_time, lr.size = buf.first, buf.last, buf.size
        ranges.append(lr)
    return [int(a) for a in allocate_live_ranges(ranges, HILL_CLIMB_ITERATIONS, target)]


def _first_fit(buffers: list[Buffer]) -> list[tuple[Buffer, int]]:
    """Each buffer in turn at the lowest aligned address free throughout its lifetime."""
    placed: list[tuple[Buffer, int]] = []
    for buf in buffers:
        busy = sorted(
            (address, address + other.size)
            for other, address in placed
            if other.first <= buf.last and buf.first <= other.last
        )
        address = 0
        for lo, hi in busy:
            if address + buf.size <= lo:
                break
            address = max(address, _align(hi))
        placed.append((buf, address))
    return placed


def fastest_block(
    memory: SystemMemory,
    op: NpuOp,
    ofm: Box,
    ifms: tuple[Box, ...],
    areas: tuple[str, str, str] = ("sram", "sram", "sram"),
) -> tuple[int, int, int]:
    """The (h, w, c) block config under which Vela's performance model runs `op` computing
    `ofm` fastest on `memory`'s system, its IFM, OFM and weights in `areas`: the largest of
    its compute cycles and each area's transfer cycles (feature-map bytes scaled by Vela's
    burst efficiency for the block, weights fetched once per block, over the area's
    bandwidth), over every block config valid for the op (ties: Vela's list order)."""
    desc = npu_op_description(op)
    hwc = [tuple(b.shape[1:]) for b in (ofm, *ifms)]
    ifm2 = hwc[2] if desc.ifm2_shape is not None and len(hwc) > 2 else None
    desc = replace(desc, ofm_shape=hwc[0], ifm_shape=hwc[1], ifm2_shape=ifm2)
    system = (memory.accelerator, memory.system_config, memory.memory_mode, memory.config_path)
    return _fastest_block(system, desc, areas)


def whole_op_block(
    memory: SystemMemory, op: NpuOp, areas: tuple[str, str, str] = ("sram", "sram", "sram")
) -> tuple[int, int, int]:
    """`fastest_block` of the op run whole, in one stripe."""
    ifms = tuple(_full(t.shape) for t in _feature_inputs(op))
    return fastest_block(memory, op, _full(op.ofm.shape), ifms, areas)


@lru_cache(maxsize=64)
def _system_arch(system: tuple) -> ArchitectureFeatures:
    """The system's Vela architecture (bandwidths do not depend on the pool size)."""
    return system_arch(*system[:3], None, system[3])


@lru_cache(maxsize=8192)
def _fastest_block(
    system: tuple, desc: NpuOpDescription, areas: tuple[str, str, str]
) -> tuple[int, int, int]:
    accelerator = system[0]
    arch = _system_arch(system)
    device = get_device(accelerator)
    ifm_area, ofm_area, weights_area = (MEM_AREAS[a] for a in areas)
    ofm_bits = NpuOpDescription.dtype_bits(desc.ofm_dtype)
    best: tuple[float, tuple[int, int, int]] | None = None
    for hwd in valid_blocks(accelerator, desc):
        try:
            config = device.vela_block_config(desc, hwd)
        except ValueError:
            continue
        query = performance_query(desc, config, areas[0], areas[1])
        cycles = measure_cycle_cost(arch, desc.vela_op, desc.faf_op, query).op_cycles
        access = measure_element_access(arch, query)
        moved = {ifm_area: 0.0, ofm_area: 0.0, weights_area: 0.0}
        moved[weights_area] += access.const_read[0]
        moved[ifm_area] += _estimate_memory_transfer_efficiency(
            arch, True, ifm_area, query.ifm_format, query.ifm_bits, config.ifm_block,
            query.ifm_shape, (access.ifm_read[0] + access.ifm_read[1]) * query.ifm_bits / 8,
        )  # fmt: skip
        moved[ofm_area] += _estimate_memory_transfer_efficiency(
            arch, False, ofm_area, query.ofm_format, ofm_bits, config.ofm_block,
            query.ofm_shape, access.ofm_write * ofm_bits / 8,
        )  # fmt: skip
        score = max(
            float(cycles),
            *(n / float(arch.memory_bandwidths_per_cycle[a]) for a, n in moved.items()),
        )
        if best is None or score < best[0]:
            best = (score, hwd)
    if best is None:
        raise ScheduleError(f"no valid block config for {desc}")
    return best[1]


def _vela_block(op: NpuOp, shape: tuple[int, ...], accelerator: str) -> tuple[int, int, int]:
    """The (h, w, c) Vela block config behind a cascader block shape. An NHCWB16 block shape
    counts depth in bricks, so the deepest valid block with that many bricks is the one."""
    if len(shape) != 5:
        return tuple((1, 1, 1, *shape)[-3:])
    height, bricks, width = shape[1], shape[2], shape[3]
    valid = valid_blocks(accelerator, npu_op_description(op))
    depths = [
        d for h, w, d in valid if h == height and w == width and math.ceil(d / BRICK) == bricks
    ]
    if not depths:
        raise ScheduleError(f"{op.name}: no valid block config matches {shape}")
    return height, width, max(depths)


def _reads_weights_in_place(
    op: NpuOp, memory: SystemMemory, encoded_size: EncodedSize, part: int, free_bytes: int
) -> bool:
    """Whether Vela's scheduler leaves a convolution's weights where they are instead of
    DMA-copying them into the fast storage first (`Scheduler.propose_weight_buffering`):
    always for a fully connected layer (its weights are read once); when the constants
    already live in the fast storage (Sram_Only); and when their encoding does not fit the
    SRAM the op's feature maps leave free (`free_bytes`; encoded for 16-deep blocks, the
    OFM split depth, since the block config is chosen later)."""
    if not isinstance(op, Conv2D):
        return False
    if op.kind == "fully_connected" or memory.roles["constants"] == memory.roles["cascade"]:
        return True
    depth = op.ofm.shape[3]
    weights = encoded_size(part, 0, depth, ArchitectureFeatures.OFMSplitDepth)
    return _align(weights) + _align(SCALE_BIAS_BYTES * depth) > free_bytes


def _op_cycles(memory: SystemMemory, op: NpuOp, block: tuple[int, int, int], depth: int) -> float:
    """Vela's compute cycles of the op cut to its first `depth` output channels, run with
    `block` (as Vela's scheduler estimates a depth slice: the IFM stays whole)."""
    desc = npu_op_description(op)
    desc = replace(desc, ofm_shape=(*desc.ofm_shape[:2], depth))
    system = (memory.accelerator, memory.system_config, memory.memory_mode, memory.config_path)
    config = get_device(memory.accelerator).vela_block_config(desc, block)
    query = performance_query(desc, config)
    cycles = measure_cycle_cost(_system_arch(system), desc.vela_op, desc.faf_op, query)
    return float(cycles.op_cycles)


def weight_depth_slices(
    op: Conv2D,
    memory: SystemMemory,
    buffer_bytes: Callable[[int, int], int],
    block: tuple[int, int, int],
    slack_cycles: float,
    limit: int,
) -> tuple[int, ...]:
    """The OFM depth slice bounds Vela's scheduler double-buffers a copied op's weights in
    (`Scheduler.propose_weight_buffering`), or () when it copies them whole. The first slice
    is what the copy can prebuffer under the previous op's `slack_cycles` (at most half of
    the `limit` bytes the feature maps leave free); later slices are as deep as the op
    computes while one slice's copy runs, in whole blocks, halved until two slices' buffers
    fit. `buffer_bytes(lo, hi)`: the encoded weights and scale-bias of channels [lo, hi)."""
    split = ArchitectureFeatures.OFMSplitDepth
    depth = op.ofm.shape[3]
    full = buffer_bytes(0, depth)
    system = (memory.accelerator, memory.system_config, memory.memory_mode, memory.config_path)
    arch = _system_arch(system)
    source = MEM_AREAS[memory.roles["constants"]]
    transfer = measure_mem2mem_cycles(arch, source, MEM_AREAS[memory.roles["cascade"]], full)
    half = limit // 2
    ratio = slack_cycles / transfer if transfer > slack_cycles else 1.0
    prebuffer = min(ratio * full, half)
    if prebuffer >= full:
        return ()
    block_depth = block[2]
    first = int(max(16, depth * (prebuffer / full) // split * split))
    buffering = depth * _op_cycles(memory, op, block, first) / transfer
    buffering = -(-buffering // block_depth) * block_depth
    if buffering / depth * full > half:
        buffering = half / full * depth
    while True:
        if buffering > block_depth:
            buffering = buffering // block_depth * block_depth
        else:
            buffering = buffering // split * split
        buffering = int(max(buffering, split))
        bounds = (0, *range(first, depth, buffering), depth) if first < depth else (0, depth)
        sizes = [buffer_bytes(lo, hi) for lo, hi in itertools.pairwise(bounds)]
        double = max(sizes[::2]) + max(sizes[1::2], default=0)
        if double <= limit or first == split:
            break
        if buffering > first:
            buffering = -(-(buffering // 2) // split) * split
        else:
            first = -(-(first // 2) // split) * split
    if len(bounds) < 3 or double > limit:
        return ()
    return bounds


def _even_slices(
    op: Conv2D, bounds: tuple[int, ...], buffer_bytes: Callable[[int, int], int], limit: int
) -> tuple[int, ...]:
    """Vela's depth slices made even (a schedule's stripes split each axis by one factor):
    as deep as its deepest slice if two such buffers fit in `limit` bytes, else as its
    shallowest; in whole bricks for an NHCWB16 OFM."""
    if not bounds:
        return ()
    depth = op.ofm.shape[3]
    steps = [hi - lo for lo, hi in itertools.pairwise(bounds)]
    for step in (max(steps), min(steps)):
        if op.ofm.layout == Layout.NHCWB16:
            step = -(-step // BRICK) * BRICK
        even = (*range(0, depth, step), depth)
        sizes = [buffer_bytes(lo, hi) for lo, hi in itertools.pairwise(even)]
        if len(even) > 2 and max(sizes[::2]) + max(sizes[1::2]) <= limit:
            return even
    return ()


def _buffer_bytes(
    memory: SystemMemory, encoded_size: EncodedSize, part: int, block_depth: int
) -> Callable[[int, int], int]:
    def size(lo: int, hi: int) -> int:
        scale_bias = scale_bias_bytes(memory.accelerator, lo, hi, block_depth)
        return _align(encoded_size(part, lo, hi, block_depth)) + _align(scale_bias)

    return size


def _feature_inputs(op: NpuOp) -> tuple[NpuTensor, ...]:
    return (op.ifm, op.ifm2) if isinstance(op, BinaryElementwise) else (op.ifm,)


def _feature_maps(op: NpuOp) -> tuple[NpuTensor, ...]:
    return (*_feature_inputs(op), op.ofm)


def _resamples(op: NpuOp) -> bool:
    """Upscaling ops run whole: the NPU cannot start an upscaled read mid-pixel."""
    return isinstance(op, Conv2D | Pooling) and op.upscale != "NONE"


def _scalar(op: NpuOp, slot: int) -> bool:
    return isinstance(op, BinaryElementwise) and (
        (slot == 0 and op.ifm_scalar is not None) or (slot == 1 and op.ifm2_scalar is not None)
    )


def _union(a: Box | None, b: Box) -> Box:
    if a is None:
        return b
    lo = tuple(min(x, y) for x, y in zip(a.start, b.start, strict=True))
    hi = tuple(max(x, y) for x, y in zip(a.end, b.end, strict=True))
    return Box(lo, tuple(h - low for low, h in zip(lo, hi, strict=True)))


def _rows_from(box: Box, row: int, stop: int | None = None) -> Box:
    """The part of `box` at or below height `row` (and above `stop`)."""
    start = max(box.start[1], row)
    end = box.end[1] if stop is None else min(box.end[1], stop)
    return Box((box.start[0], start, *box.start[2:]), (box.shape[0], end - start, *box.shape[2:]))


def _rolls(full: tuple[int, ...], boxes: list[Box]) -> bool:
    """Whether a part holding these boxes can roll: every box spans all of its output but
    the height (as `_size_plan_buffers` decides)."""
    frame = _max_shape(boxes)
    return all(frame[a] == full[a] for a in (0, 2, 3))


def _max_shape(boxes: list[Box]) -> tuple[int, ...]:
    return tuple(max(b.shape[a] for b in boxes) for a in range(len(boxes[0].shape)))


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def feature_map_bytes(shape: Sequence[int], layout: Layout, dtype_bytes: int) -> int:
    """Bytes of an NHWC-shaped box stored in `layout` (NHCWB16 rounds depth up to bricks)."""
    n, h, w, c = (1, 1, 1, *shape)[-4:]
    if layout == Layout.NHCWB16:
        c = math.ceil(c / BRICK) * BRICK
    return n * h * w * c * dtype_bytes


def _finish(builder: _Builder, check: bool) -> Schedule:
    builder.pin_io()
    extents = builder.allocate()
    schedule = Schedule(
        builder.net,
        builder.memory,
        builder.steps,
        builder.buffers,
        builder.tensor_buffer,
        extents,
    )
    pool = builder.memory.sram_bytes
    if check and schedule.sram_bytes > pool:
        raise ScheduleError(
            f"the schedule needs {schedule.sram_bytes} bytes of SRAM but the pool has {pool}"
        )
    return schedule


def proposal_schedule(
    net: Network,
    proposal: Proposal,
    memory: SystemMemory,
    encoded_size: EncodedSize,
    check: bool = True,
    blocks: str = "fastest",
) -> Schedule:
    """The stripe schedule of a chosen proposal. `encoded_size(part, lo, hi, block_depth)`
    gives the encoded bytes of a part's weights for output channels [lo, hi), which sizes the
    buffers weights are copied into. With `check`, ScheduleError when the SRAM it needs
    exceeds the pool. `blocks` picks each part's block config: the fastest under Vela's
    performance model for its stripes ("fastest"), or the one the cascader's cost assumed
    ("cascader")."""
    builder = _Builder(net, memory, encoded_size, blocks)
    plans = [_plan_from_proposal_plan(net, plan, memory) for plan in proposal.plans]
    builder.homes = _agreed_homes(net, plans, builder)
    plans = [builder.double_buffered(plan) for plan in plans]
    for index, plan in enumerate(_plan_order(net, plans)):
        builder.run_plan(plan, index, recorded=True)
    return _finish(builder, check=check)


def layer_by_layer_schedule(
    net: Network,
    memory: SystemMemory,
    encoded_size: EncodedSize,
    feature_maps: str = "io",
    check: bool = True,
    blocks: str = "fastest",
) -> Schedule:
    """The copy-constants schedule: every op whole, in model order, its feature maps in the
    `feature_maps` role's area ("io": Vela's arena; "cascade": the SRAM, graph inputs and
    outputs staying in the arena), its weights and scale-bias copied into the cascade area
    right before it where Vela's scheduler would buffer them (`_reads_weights_in_place`),
    read in place otherwise. Where Vela would double-buffer them (`weight_depth_slices`) the
    op runs in output-depth slices whose copies alternate between two buffers."""
    builder = _Builder(net, memory, encoded_size, blocks)
    graph = net.graph
    area = memory.roles[feature_maps]

    def home_of(tid: int) -> str:
        return memory.roles["io"] if builder.root(tid) in builder.graph_io else area

    plans = []
    slack = 0.0  # cycles of the previous op (of its last slice) a weight copy can hide under
    function = None
    for part in reversed(graph.parts):
        if part.in_line:
            continue
        op = net.ops[part.id]
        if net.function_of[part.id] != function:  # a function's first op follows no NPU op
            slack, function = 0.0, net.function_of[part.id]
        free = memory.sram_bytes - sum(
            feature_map_bytes(*builder.tensor_shape(t.id))
            for t in [*part.inputs, part.output]
            if not t.is_constant and home_of(t.id) == memory.roles["cascade"]
        )
        in_place = _reads_weights_in_place(op, memory, encoded_size, part.id, free)
        areas = (home_of(part.inputs[0].id), home_of(part.output.id), memory.roles["cascade"])
        block = whole_op_block(memory, op, areas)
        slices: tuple[int, ...] = ()
        if isinstance(op, Conv2D) and not in_place:
            sizes = _buffer_bytes(memory, encoded_size, part.id, block[2])
            slices = _even_slices(op, weight_depth_slices(op, memory, sizes, block, slack, free),
                                  sizes, free)  # fmt: skip
        last = slices[-1] - slices[-2] if slices else op.ofm.shape[3]
        slack = _op_cycles(memory, op, block, last)
        placements = {}
        for slot, tensor in enumerate(part.inputs):
            if tensor.is_constant and in_place:
                placements[part.id, slot] = _Placement("tensor", memory.roles["constants"])
            elif tensor.is_constant:
                placements[part.id, slot] = _Placement("window", memory.roles["cascade"], True)
            else:
                placements[part.id, slot] = _Placement("tensor", home_of(tensor.id))
        home = home_of(part.output.id)
        whole = StripeConfig(part.output.shape, part.output.shape, part.output.shape,
                             (0,) * len(part.output.shape), (1,) * len(part.output.shape),
                             (0,) * len(part.output.shape))  # fmt: skip
        plans.append(
            _Plan(
                parts=(part.id,),
                output_part=part.id,
                output_stripe=op.ofm.shape,
                stripe_configs={part.id: whole},
                placements=placements,
                outputs={part.id: _Placement("tensor", home)},
                depth_slices=slices,
            )
        )
    for index, plan in enumerate(plans):
        builder.run_plan(plan, index)
    return _finish(builder, check=check)
