"""A stripe schedule as TIR: one PrimFunc per NPU function, its buffers allocated where the
schedule put them, each cascaded plan a nest of stripe loops, and each copy and stripe an
extern NPU call, in program order.

Each buffer of the schedule is an `AllocBuffer` of bytes in the scope of its memory area, its
placement annotated (index, graph tensor, kind, area, region, address, size, frame, layout,
element bytes, live range, rolling rows). A copy is `ethosu_copy(what, part, tensor, box,
source, dest)`; a stripe is `ethosu_<op kind>(part, plan, ofm box, ofm buffer, ofm origin,
ifm count, per ifm (box, buffer, origin), padding, block config, channel range, weights
buffer, bias buffer)`, buffers passed by their data pointers (-1: read from the constants),
under an "ethos-u.compute_cycles_hint" attribute (Vela's compute cycles of the stripe) and an
"ethos-u.op" attribute whose node maps the op's integer attributes (`op_attributes`).
Boxes are (rank, start, shape): NHWC, or the output-channel range of constants.

A plan's stripe loops come from s_tir (`plan_nest`): the TE of the plan's parts as one
PrimFunc, the output split into its stripes, producers computed at the stripe loop and copied
inputs cached in SRAM there. Under those loops the compute blocks are replaced by the NPU
calls of each iteration, chosen by the loops' index: the schedule's edge stripes differ in
shape, a rolling buffer computes only the rows it lacks and a loop-invariant copy runs once,
so an iteration's calls are written out rather than derived from the loop variables."""

from __future__ import annotations

import math
from dataclasses import asdict, fields, is_dataclass, replace

import numpy as np
from tvm import te, tirx
from tvm.ir import StringImm
from tvm.s_tir import Schedule as TirSchedule

from cascader.ethosu.graph import npu_op_description
from cascader.ethosu.vela_cost import hint_cycles
from cascader.ir.boxes import Box
from cascader.ir.errors import ScheduleError
from cascader.ir.layout import stored_shape
from cascader.ir.npu_ops import (
    BinaryElementwise,
    Concatenation,
    Conv2D,
    Identity,
    NpuOp,
    Pooling,
    feature_inputs,
)
from cascader.ir.schedule import Buffer, Copy, Schedule, Step, Stripe
from cascader.lowering.te import TeOp, feature_roles, te_compute
from cascader.schedule.network import Network

__all__ = [
    "BUFFER_ANNOTATION",
    "COPY",
    "CYCLES_ATTR",
    "NO_BUFFER",
    "OP_ATTR",
    "PLAN_ATTR",
    "SKIPPED_FIELDS",
    "STRIPE_ATTR",
    "call_name",
    "compute_cycles",
    "lower",
    "lower_function",
    "op_attributes",
    "plan_nest",
]

COPY = "ethosu_copy"
BUFFER_ANNOTATION = "ethos-u.buffer"
PLAN_ATTR = "ethos-u.plan"
STRIPE_ATTR = "ethos-u.stripe"
CYCLES_ATTR = "ethos-u.compute_cycles_hint"
OP_ATTR = "ethos-u.op"
SKIPPED_FIELDS = {"name", "ifm", "ifm2", "ifms", "ofm", "lut", "function"}  # not op attributes
NO_BUFFER = -1
SCOPES = {"sram": "global.sram"}


def call_name(op: NpuOp) -> str:
    """The extern NPU call of an op kind."""
    if isinstance(op, Conv2D):
        return f"ethosu_{op.kind}"
    if isinstance(op, Pooling):
        return "ethosu_pooling"
    if isinstance(op, BinaryElementwise):
        return "ethosu_binary_elementwise"
    if isinstance(op, Identity):
        return "ethosu_identity"
    if isinstance(op, Concatenation):
        return "ethosu_concatenation"
    return "ethosu_unary_elementwise"


def _tir_buffer(buf: Buffer) -> tuple[tirx.Buffer, tirx.AllocBuffer]:
    scope = SCOPES.get(buf.area, "global")
    data = tirx.decl_buffer((buf.size,), "uint8", name=f"buffer{buf.index}_t{buf.tensor}",
                            scope=scope)  # fmt: skip
    annotations = {
        BUFFER_ANNOTATION: {
            "index": buf.index,
            "tensor": buf.tensor,
            "kind": buf.kind,
            "area": buf.area,
            "region": buf.region,
            "address": buf.address,
            "size": buf.size,
            "frame": list(buf.frame),
            "layout": buf.layout.value,
            "dtype_bytes": buf.dtype_bytes,
            "first": buf.first,
            "last": buf.last,
            "rows": buf.rows,
        }
    }
    return data, tirx.AllocBuffer(data, annotations)


def _box(box: Box) -> list[int]:
    return [len(box.start), *box.start, *box.shape]


class _Lowering:
    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.data: dict[int, tirx.PrimExpr] = {}
        self.allocations: list[tirx.Stmt] = []

    def pointer(self, index: int) -> tirx.PrimExpr | int:
        if index < 0:
            return NO_BUFFER
        if index not in self.data:
            buffer, allocation = _tir_buffer(self.schedule.buffers[index])
            self.data[index] = buffer.data
            self.allocations.append(allocation)
        return self.data[index]

    def call(self, step: Step) -> tirx.Stmt:
        if isinstance(step, Copy):
            args = [step.what, step.part, step.tensor, *_box(step.box),
                    self.pointer(step.source), self.pointer(step.dest)]  # fmt: skip
            return tirx.Evaluate(tirx.call_extern("handle", COPY, *args))
        op = self.schedule.network.ops[step.part]
        args = [step.part, step.plan, *_box(step.ofm), self.pointer(step.ofm_buffer),
                *step.ofm_origin, len(step.ifms)]  # fmt: skip
        for box, buffer, origin in step.ifms:
            args += [*_box(box), self.pointer(buffer), *origin]
        args += [*step.padding, *step.block, *(step.channels or (NO_BUFFER, NO_BUFFER)),
                 self.pointer(step.weights_buffer), self.pointer(step.bias_buffer)]  # fmt: skip
        call = tirx.Evaluate(tirx.call_extern("handle", call_name(op), *args))
        cycles = tirx.IntImm("int64", compute_cycles(self.schedule, step))
        hinted = tirx.AttrStmt(StringImm("ethos-u"), CYCLES_ATTR, cycles, call)
        return tirx.AttrStmt(op_attributes(op), OP_ATTR, tirx.IntImm("int32", step.part), hinted)


def op_attributes(op: NpuOp) -> dict:
    """The op's integer and enumerated attributes (kernel, padding, activation clamp,
    operator, rounding, offsets, scalars, ...): every field but its name, feature maps and
    constant arrays, dataclass fields as maps, None left out."""
    found: dict = {}
    for f in fields(op):
        value = getattr(op, f.name)
        if f.name in SKIPPED_FIELDS or value is None or isinstance(value, np.ndarray):
            continue
        if is_dataclass(value):
            value = {k: v for k, v in asdict(value).items() if k not in SKIPPED_FIELDS}
        found[f.name] = list(value) if isinstance(value, tuple) else value
    return found


def compute_cycles(schedule: Schedule, stripe: Stripe) -> int:
    """The stripe's compute cycles under Vela's model with its block config: the hint each
    NPU call carries (the cascader's cost of the stripe, without memory transfers)."""
    op = schedule.network.ops[stripe.part]
    desc = npu_op_description(op)
    shapes = [tuple(b.shape[1:]) for b, _, _ in stripe.ifms]
    if isinstance(op, Concatenation):  # its copies, costed as one of the whole OFM box
        shapes = [tuple(stripe.ofm.shape[1:])]
    ifm2 = shapes[1] if desc.ifm2_shape is not None and len(shapes) > 1 else desc.ifm2_shape
    desc = replace(desc, ofm_shape=tuple(stripe.ofm.shape[1:]), ifm_shape=shapes[0],
                   ifm2_shape=ifm2)  # fmt: skip
    areas = (schedule.buffers[stripe.ifms[0][1]].area, schedule.buffers[stripe.ofm_buffer].area)
    return hint_cycles(schedule.memory.accelerator, desc, stripe.block, areas)


def _plan_segments(steps: list[Step]) -> list[tuple[int, list[Step]]]:
    """Consecutive steps of one plan (copies go with the stripe they feed)."""
    segments: list[tuple[int, list[Step]]] = []
    pending: list[Step] = []
    for step in steps:
        pending.append(step)
        if isinstance(step, Stripe):
            if segments and segments[-1][0] == step.plan:
                segments[-1][1].extend(pending)
            else:
                segments.append((step.plan, pending))
            pending = []
    if pending:
        if not segments:
            raise ScheduleError("copies without a stripe to feed")
        segments[-1][1].extend(pending)
    return segments


def _stripe_iterations(lowering: _Lowering, output_part: int, steps: list[Step]) -> list[tirx.Stmt]:
    """The steps of a plan cut into its stripe loop's iterations: each ends with a stripe of
    the plan's output part."""
    iterations: list[tirx.Stmt] = []
    current: list[tirx.Stmt] = []
    for step in steps:
        current.append(lowering.call(step))
        if isinstance(step, Stripe) and step.part == output_part:
            iterations.append(_attr(STRIPE_ATTR, len(iterations), current))
            current = []
    if current:
        iterations.append(_attr(STRIPE_ATTR, len(iterations), current))
    return iterations


def _loop_nest(loops: list[tuple[str, int]], iterations: list[tirx.Stmt]) -> tirx.Stmt:
    """The stripe loops (name, extent), outermost first, around the iterations; iteration k
    runs where the loops' row-major index is k."""
    variables = [tirx.Var(name, "int32") for name, _ in loops]
    index: tirx.PrimExpr = tirx.IntImm("int32", 0)
    for var, (_, extent) in zip(variables, loops, strict=True):
        index = index * extent + var
    body: tirx.Stmt = tirx.SeqStmt(
        [tirx.IfThenElse(tirx.EQ(index, k), stmt, None) for k, stmt in enumerate(iterations)]
    )
    for var, (_, extent) in reversed(list(zip(variables, loops, strict=True))):
        body = tirx.For(var, 0, extent, tirx.ForKind.SERIAL, body)
    return body


def _attr(key: str, value: int, body: list[tirx.Stmt]) -> tirx.Stmt:
    stmt = tirx.SeqStmt(body) if len(body) > 1 else body[0]
    return tirx.AttrStmt(StringImm("ethos-u"), key, tirx.IntImm("int32", value), stmt)


def lower_function(schedule: Schedule, function: int) -> tirx.PrimFunc:
    """The PrimFunc of NPU function `function`: its host-visible inputs and outputs as
    parameters, the schedule's buffers allocated, its copies and stripes as NPU calls."""
    net = schedule.network
    steps = [s for s in schedule.steps if net.function_of[s.part] == function]
    lowering = _Lowering(schedule)
    body: list[tirx.Stmt] = []
    for plan, plan_steps in _plan_segments(steps):
        stripes = [s for s in plan_steps if isinstance(s, Stripe)]
        output_part = stripes[-1].part
        iterations = _stripe_iterations(lowering, output_part, plan_steps)
        if len(iterations) == 1:
            nest = iterations[0]
        else:
            _, loops = plan_nest(schedule, plan_steps)
            if math.prod(extent for _, extent in loops) != len(iterations):
                raise ScheduleError(f"plan {plan}: {len(iterations)} stripes, loops {loops}")
            nest = _loop_nest(loops, iterations)
        body.append(tirx.AttrStmt(StringImm("ethos-u"), PLAN_ATTR,
                                  tirx.IntImm("int32", plan), nest))  # fmt: skip
    params = _io_buffers(schedule, function)
    name = net.functions[function].name
    return tirx.PrimFunc(params, tirx.SeqStmt([*lowering.allocations, *body])).with_attr(
        {
            "global_symbol": name,
            "ethos-u.function": function,
            "ethos-u.extents": dict(schedule.extents),
        }
    )


def _io_buffers(schedule: Schedule, function: int) -> list[tirx.Buffer]:
    net = schedule.network
    graph = net.graph
    producers = {p.output.id: p.id for p in graph.parts}
    readers: dict[int, int] = {}
    for part in graph.parts:
        for tensor in part.inputs:
            readers.setdefault(tensor.id, part.id)
    ins = [t for t in graph.input_tensors if not t.is_constant]
    outs = list(graph.output_tensors)
    mine = [t for t in ins if net.function_of[readers[t.id]] == function] + [
        t for t in outs if net.function_of[producers[t.id]] == function
    ]
    maps = [net.feature_map(t.id) for t in mine]
    return [tirx.decl_buffer(m.shape, m.dtype, name=m.name) for m in maps]


def lower(schedule: Schedule) -> list[tirx.PrimFunc]:
    """Every NPU function of the schedule's network lowered, in function order."""
    return [lower_function(schedule, f) for f in range(len(schedule.network.functions))]


# ---- the plan's loop nest, as s_tir schedules it ----------------------------------------------

_COPIED_ROLES = {"weights": ("weights",), "scale_bias": ("bias", "multiplier", "shift")}


def _te_chain(net: Network, parts: list[int]) -> dict[int, TeOp]:
    """The TE of the plan's parts, each reading its producer's output when the producer is
    in the plan (and writes the shape it reads), else its own placeholder."""
    produced: dict[int, te.Tensor] = {}
    computes: dict[int, TeOp] = {}
    for pid in parts:
        op = net.ops[pid]
        feature_maps = {}
        slots = zip(
            feature_roles(op), feature_inputs(op), net.graph.parts[pid].inputs, strict=False
        )
        for role, read, tensor in slots:
            source = produced.get(tensor.id)
            if source is not None and tuple(source.shape) == stored_shape(read):
                feature_maps[role] = source
        computes[pid] = te_compute(op, feature_maps)
        produced[net.graph.parts[pid].output.id] = computes[pid].output
    return computes


def _copied_placeholders(net: Network, computes: dict[int, TeOp], steps: list[Step]) -> list:
    """The placeholders whose data the plan's copies move into SRAM."""
    found = []
    for step in steps:
        if not isinstance(step, Copy) or step.part not in computes:
            continue
        inputs = computes[step.part].inputs
        if step.what == "feature_map":
            tensors = net.graph.parts[step.part].inputs
            roles = [
                r
                for r, t in zip(feature_roles(net.ops[step.part]), tensors, strict=False)
                if t.id == step.tensor
            ]
        else:
            roles = list(_COPIED_ROLES[step.what])
        found += [inputs[r] for r in roles if r in inputs]
    return found


def plan_nest(schedule: Schedule, steps: list[Step]) -> tuple[tirx.PrimFunc, list[tuple[str, int]]]:
    """One plan's steps as s_tir schedules the TE of its parts, and its stripe loops (name,
    extent), outermost first: the output part's stored axes split by its stripe and the stripe
    loops hoisted (split, reorder), every producer computed at the innermost stripe loop
    (compute_at: TVM checks the cascade is legal and infers what each stripe needs), and the
    constants and feature maps the schedule copies read through SRAM caches filled at that
    loop (cache_read, compute_at)."""
    net = schedule.network
    stripes = [s for s in steps if isinstance(s, Stripe)]
    output = stripes[-1].part
    computes = _te_chain(net, list(dict.fromkeys(s.part for s in stripes)))
    placeholders = list(
        {id(t): t for c in computes.values() for t in c.inputs.values()
         if isinstance(t.op, te.PlaceholderOp)}.values()
    )  # fmt: skip
    func = te.create_prim_func([*placeholders, computes[output].output])
    name_of = {id(t): p.name for t, p in zip(placeholders, func.params, strict=False)}
    sch = TirSchedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    nhwc = next(s.ofm.shape for s in stripes if s.part == output)
    ofm = net.ops[output].ofm
    factors = stored_shape(replace(ofm, shape=nhwc))[:4]  # a brick's 16 channels stay inner
    outer, inner = [], []
    for loop, factor in zip(sch.get_loops(blocks[-1]), factors, strict=False):
        o, i = sch.split(loop, factors=[None, factor])
        outer.append(o)
        inner.append(i)
    sch.reorder(*outer, *inner)
    for block in reversed(blocks[:-1]):
        sch.compute_at(block, outer[-1])
    cached = {name_of[id(t)] for t in _copied_placeholders(net, computes, steps)}
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        reads = [r.source.name for r in sch.get(block).reads]
        for index, buffer in enumerate(reads):
            if buffer in cached:
                sch.compute_at(sch.cache_read(block, index, SCOPES["sram"]), outer[-1])
    loops = [(str(sch.get(o).loop_var.name), int(sch.get(o).extent)) for o in outer]
    return sch.mod["main"], loops
