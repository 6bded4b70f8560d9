"""Lowered TIR back to the NPU program: the extern NPU calls of each PrimFunc read in program
order into the copies and stripes they stand for, their buffers from the allocations'
placement annotations, each op's attributes from the "ethos-u.op" attribute its calls carry,
and that program handed to codegen (Vela API operations, register command stream, encoded
constants). The network supplies only each op's feature maps (shapes, quantisation) and
constants (weights, biases, scales, LUTs), the memory system the areas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, is_dataclass, replace

import numpy as np
from tvm import tirx
from tvm.ir import Call, Op
from tvm_ffi import Array

from cascader.ethosu.codegen import Compiled, generate
from cascader.ethosu.memory import SystemMemory
from cascader.ir.boxes import Box
from cascader.ir.errors import ScheduleError
from cascader.ir.npu_ops import Layout, NpuOp
from cascader.ir.schedule import Buffer, Copy, Schedule, Step, Stripe
from cascader.lowering.lower import BUFFER_ANNOTATION, COPY, OP_ATTR, SKIPPED_FIELDS, call_name
from cascader.schedule.network import Network

__all__ = ["compile_tir", "npu_calls", "op_from_tir", "schedule_from_tir"]

_CALL_EXTERN = Op.get("tirx.call_extern")
_BUFFER_DATA = Op.get("tirx.buffer_data")


def npu_calls(func: tirx.PrimFunc) -> tuple[list[tirx.AllocBuffer], list[Call]]:
    """The buffer allocations and the extern NPU calls of `func` in program order: stripe
    loops run through, each iteration taking the branches its loop indices select."""
    program = _Program()
    _run(func.body, {}, program)
    return program.allocations, program.calls


class _Program:
    """What a walk through a lowered function finds: allocations, NPU calls in program order
    and per part the op attributes its calls carry."""

    def __init__(self) -> None:
        self.allocations: list[tirx.AllocBuffer] = []
        self.calls: list[Call] = []
        self.op_attributes: dict[int, object] = {}


def _run(stmt, env: dict[str, int], program: _Program) -> None:
    if isinstance(stmt, tirx.SeqStmt):
        for child in stmt.seq:
            _run(child, env, program)
    elif isinstance(stmt, tirx.AttrStmt):
        if stmt.attr_key == OP_ATTR:
            program.op_attributes.setdefault(int(stmt.value), stmt.node)
        _run(stmt.body, env, program)
    elif isinstance(stmt, tirx.For):
        start, extent = _value(stmt.min, env), _value(stmt.extent, env)
        for i in range(start, start + extent):
            _run(stmt.body, {**env, stmt.loop_var.name: i}, program)
    elif isinstance(stmt, tirx.IfThenElse):
        if _value(stmt.condition, env):
            _run(stmt.then_case, env, program)
        elif stmt.else_case is not None:
            _run(stmt.else_case, env, program)
    elif isinstance(stmt, tirx.AllocBuffer):
        program.allocations.append(stmt)
    elif (
        isinstance(stmt, tirx.Evaluate)
        and isinstance(stmt.value, Call)
        and stmt.value.op.same_as(_CALL_EXTERN)
    ):
        program.calls.append(stmt.value)


def _value(expr, env: dict[str, int]) -> int:
    """An integer expression of loop variables (what the lowering writes: +, *, ==)."""
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tirx.Var):
        return env[expr.name]
    if isinstance(expr, tirx.Add):
        return _value(expr.a, env) + _value(expr.b, env)
    if isinstance(expr, tirx.Mul):
        return _value(expr.a, env) * _value(expr.b, env)
    if isinstance(expr, tirx.EQ):
        return int(_value(expr.a, env) == _value(expr.b, env))
    raise ScheduleError(f"cannot evaluate {expr} in an NPU program")


def _buffer(allocation: tirx.AllocBuffer, index: int) -> Buffer:
    a = allocation.annotations[BUFFER_ANNOTATION]
    return Buffer(
        index=index,
        tensor=int(a["tensor"]),
        kind=str(a["kind"]),
        area=str(a["area"]),
        region=int(a["region"]),
        frame=tuple(int(x) for x in a["frame"]),
        layout=Layout(str(a["layout"])),
        dtype_bytes=int(a["dtype_bytes"]),
        size=int(a["size"]),
        first=int(a["first"]),
        last=int(a["last"]),
        address=int(a["address"]),
        rows=int(a["rows"]),
    )


def _plain(value):
    if isinstance(value, Array):
        return tuple(_plain(v) for v in value)
    return value


def op_from_tir(op: NpuOp, attributes) -> NpuOp:
    """`op` with the attributes its NPU calls carry (see `lower.op_attributes`): the TIR says
    how the op runs, the network keeps its feature maps and constants."""
    changes = {}
    for f in fields(op):
        current = getattr(op, f.name)
        if f.name in SKIPPED_FIELDS or isinstance(current, np.ndarray):
            continue
        value = attributes.get(f.name)
        if value is not None and is_dataclass(current):
            value = replace(current, **{str(k): _plain(v) for k, v in value.items()})
        changes[f.name] = _plain(value)
    return replace(op, **changes)


class _Reader:
    """Reads one call's arguments front to back."""

    def __init__(self, call: Call, buffers: dict[str, int]) -> None:
        self.args = list(call.args[1:])
        self.at = 0
        self.buffers = buffers

    def next(self):
        arg = self.args[self.at]
        self.at += 1
        return arg

    def int(self) -> int:
        return int(self.next())

    def ints(self, n: int) -> tuple[int, ...]:
        return tuple(self.int() for _ in range(n))

    def box(self) -> Box:
        rank = self.int()
        return Box(self.ints(rank), self.ints(rank))

    def buffer(self) -> int:
        arg = self.next()
        if isinstance(arg, Call) and arg.op.same_as(_BUFFER_DATA):
            return self.buffers[arg.args[0].name]
        return int(arg)

    def done(self) -> None:
        if self.at != len(self.args):
            raise ScheduleError(f"{len(self.args) - self.at} unread arguments in an NPU call")


def _step(call: Call, buffers: dict[str, int], net: Network) -> Step:
    name = str(call.args[0].value)
    r = _Reader(call, buffers)
    if name == COPY:
        what = str(r.next().value)
        part, tensor = r.int(), r.int()
        copy = Copy(tensor=tensor, what=what, part=part, box=r.box(), source=r.buffer(),
                    dest=r.buffer())  # fmt: skip
        r.done()
        return copy
    part, plan = r.int(), r.int()
    if call_name(net.ops[part]) != name:
        raise ScheduleError(f"{name} calls part {part}, which is {net.ops[part].name}")
    ofm, ofm_buffer, ofm_origin = r.box(), r.buffer(), r.ints(4)
    ifms = tuple((r.box(), r.buffer(), r.ints(4)) for _ in range(r.int()))
    padding, block, channels = r.ints(4), r.ints(3), r.ints(2)
    stripe = Stripe(
        part=part,
        plan=plan,
        ofm=ofm,
        ofm_buffer=ofm_buffer,
        ofm_origin=ofm_origin,
        ifms=ifms,
        padding=padding,
        block=block,
        channels=None if channels[0] < 0 else channels,
        weights_buffer=r.buffer(),
        bias_buffer=r.buffer(),
    )
    r.done()
    return stripe


def schedule_from_tir(
    funcs: Sequence[tirx.PrimFunc], network: Network, memory: SystemMemory
) -> Schedule:
    """The stripe schedule the lowered functions run (buffers numbered in allocation order)."""
    buffers: list[Buffer] = []
    steps: list[Step] = []
    extents: dict[str, int] = {}
    ops = list(network.ops)
    for func in funcs:
        program = _Program()
        _run(func.body, {}, program)
        pointers: dict[str, int] = {}
        for allocation in program.allocations:
            pointers[allocation.buffer.name] = len(buffers)
            buffers.append(_buffer(allocation, len(buffers)))
        steps += [_step(call, pointers, network) for call in program.calls]
        for part, attributes in program.op_attributes.items():
            ops[part] = op_from_tir(network.ops[part], attributes)
        extents.update({str(k): int(v) for k, v in func.attrs["ethos-u.extents"].items()})
    tensor_buffer = {b.tensor: b.index for b in buffers if b.kind == "tensor"}
    net = replace(network, ops=tuple(ops))
    return Schedule(net, memory, steps, buffers, tensor_buffer, extents)


def compile_tir(
    funcs: Sequence[tirx.PrimFunc], network: Network, memory: SystemMemory, accelerator: str
) -> Compiled:
    """Command streams, driver payloads and constants of the lowered functions."""
    return generate(schedule_from_tir(funcs, network, memory), accelerator)
