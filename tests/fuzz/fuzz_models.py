"""TFLite inputs for the fuzz suite: small real models (built with ModelBuilder) and seeded
mutations of their bytes: single fields set to hostile values in place (indices, shapes,
quantisation, operator options), random bytes, truncations and insertions."""

from __future__ import annotations

import functools
import inspect
import math
import random
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tflite
from tflite.BuiltinOptions import BuiltinOptions

from cascader.testing.networks import chain, single_op_model
from cascader.testing.tflite_builder import ModelBuilder


def _dilated() -> bytes:
    b = ModelBuilder(1, name="dilated")
    x = b.conv2d(b.input((1, 16, 16, 4)), 8, kernel=3, dilation=2, padding="VALID")
    b.output(b.depthwise_conv2d(x, kernel=3, dilation=2, activation="RELU6"))
    return b.build()


def _pooled() -> bytes:
    b = ModelBuilder(2, name="pooled")
    x = b.average_pool2d(b.input((1, 12, 12, 8)), pool=2, stride=2, padding="VALID")
    y = b.max_pool2d(x, pool=3, stride=1)
    b.output(b.softmax(b.fully_connected(b.reshape(y, (1, 4 * 4 * 8)), 8), beta=0.5))
    return b.build()


def _joined() -> bytes:
    b = ModelBuilder(3, name="joined")
    x, y = b.input((1, 8, 8, 8)), b.input((1, 8, 8, 8))
    z = b.concatenation([b.add(x, y, activation="RELU"), b.mul(x, y)], axis=3)
    b.output(b.leaky_relu(z, alpha=0.1))
    return b.build()


# Small models whose `dse estimate --no-cascade` takes a fraction of a second; together they
# carry every field the mutations aim at (dilations, VALID padding, activations, beta, ...).
BASES: dict[str, Callable[[], bytes]] = {
    "chain": lambda: chain().build(),
    "conv": lambda: single_op_model("CONV_2D", stride=2, padding="VALID"),
    "depthwise": lambda: single_op_model("DEPTHWISE_CONV_2D", depth_multiplier=2),
    "dilated": _dilated,
    "pooled": _pooled,
    "joined": _joined,
    "transpose_conv": lambda: single_op_model("TRANSPOSE_CONV", stride=2),
    "resize": lambda: single_op_model("RESIZE_NEAREST_NEIGHBOR"),
}


@functools.cache
def base_model(name: str) -> bytes:
    return BASES[name]()


@dataclass(frozen=True)
class Slot:
    """One scalar of a model's flatbuffer: where it is, its struct format, what it is."""

    pos: int
    fmt: str
    what: str


_FORMATS = {"Int8": "b", "Uint8": "B", "Bool": "B", "Int32": "i", "Uint32": "I", "Int64": "q",
            "Float32": "f"}  # fmt: skip
_FIELD = re.compile(
    r"def (\w+)\(self\):\n\s+o = flatbuffers.number_types.UOffsetTFlags.py_type"
    r"\(self._tab.Offset\((\d+)\)\)\n\s+if o != 0:\n\s+return (?:bool\()?"
    r"self._tab.Get\(flatbuffers.number_types.(\w+)Flags"
)
_OPTION_NAMES = {code: name for name, code in vars(BuiltinOptions).items() if name[0] != "_"}


@functools.cache
def _scalar_fields(table_name: str) -> tuple[tuple[int, str, str], ...]:
    """(vtable offset, field name, struct format) of each scalar field of a tflite table,
    read from its generated reader."""
    cls = getattr(tflite, table_name, None)
    if cls is None:
        return ()
    found = _FIELD.findall(inspect.getsource(cls))
    return tuple((int(off), name, _FORMATS[kind]) for name, off, kind in found if kind in _FORMATS)


def _table_slots(tab, table_name: str, what: str) -> list[Slot]:
    slots = []
    for offset, name, fmt in _scalar_fields(table_name):
        o = tab.Offset(offset)
        if o:
            slots.append(Slot(tab.Pos + o, fmt, f"{what}.{name}"))
    return slots


def _vector_slots(tab, offset: int, fmt: str, what: str) -> list[Slot]:
    o = tab.Offset(offset)
    if not o:
        return []
    start, length = tab.Vector(o), tab.VectorLen(o)
    size = struct.calcsize(fmt)
    return [Slot(start + i * size, fmt, f"{what}[{i}]") for i in range(length)]


def slots(buf: bytes) -> list[Slot]:
    """Every scalar a mutation may set: tensor shapes, types, buffers and quantisation;
    operator codes, inputs, outputs and options; the graph's inputs and outputs."""
    model = tflite.Model.GetRootAsModel(buf, 0)
    found = []
    for c in range(model.OperatorCodesLength()):
        found += _table_slots(model.OperatorCodes(c)._tab, "OperatorCode", f"opcode{c}")
    graph = model.Subgraphs(0)
    found += _vector_slots(graph._tab, 6, "i", "inputs")
    found += _vector_slots(graph._tab, 8, "i", "outputs")
    for t in range(graph.TensorsLength()):
        tensor = graph.Tensors(t)
        what = f"tensor{t}"
        found += _table_slots(tensor._tab, "Tensor", what)
        found += _vector_slots(tensor._tab, 4, "i", f"{what}.shape")
        quant = tensor.Quantization()
        if quant is not None:
            found += _table_slots(quant._tab, "QuantizationParameters", f"{what}.quant")
            found += _vector_slots(quant._tab, 8, "f", f"{what}.scale")
            found += _vector_slots(quant._tab, 10, "q", f"{what}.zero_point")
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        what = f"op{i}"
        found += _table_slots(op._tab, "Operator", what)
        found += _vector_slots(op._tab, 6, "i", f"{what}.inputs")
        found += _vector_slots(op._tab, 8, "i", f"{what}.outputs")
        table = op.BuiltinOptions()
        name = _OPTION_NAMES.get(op.BuiltinOptionsType())
        if table is not None and name:
            found += _table_slots(table, name, f"{what}.{name}")
            if name == "ReshapeOptions":
                found += _vector_slots(table, 4, "i", f"{what}.new_shape")
    return found


_HOSTILE: dict[str, tuple] = {
    "b": (-128, -1, 0, 1, 2, 3, 4, 5, 6, 99, 127),
    "B": (0, 1, 2, 3, 4, 9, 17, 127, 200, 255),
    "i": (-(1 << 31), -1, 0, 1, 2, 3, 4, 7, 64, 1000, 65535, 65536, 1 << 24, (1 << 31) - 1),
    "I": (0, 1, 2, 3, 5, 100, 1 << 16, 1 << 31, (1 << 32) - 1),
    "q": (-(1 << 63), -129, -128, -1, 0, 1, 127, 128, 255, 256, 1 << 31, (1 << 63) - 1),
    "f": (math.inf, -math.inf, math.nan, 0.0, -0.0, -1.0, 1e-45, 1e-38, 1e-30, 1e-12, 0.5, 1.0,
          3.0, 1e12, 1e30, 3.4e38),
}  # fmt: skip


def hostile_value(fmt: str, rng: random.Random) -> int | float:
    """A value likely to break something, now and then a random one of the type."""
    if rng.random() < 0.8:
        return rng.choice(_HOSTILE[fmt])
    if fmt == "f":
        return float(np.float32(rng.uniform(-1, 1) * 10 ** rng.randint(-40, 38)))
    bits = 8 * struct.calcsize(fmt)
    if fmt.islower():
        return rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return rng.randint(0, (1 << bits) - 1)


def set_field(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    """`buf` with one scalar field set to a hostile value."""
    slot = rng.choice(slots(buf))
    value = hostile_value(slot.fmt, rng)
    data = bytearray(buf)
    struct.pack_into("<" + slot.fmt, data, slot.pos, value)
    return bytes(data), f"{slot.what}={value}"


def flip_bytes(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    data = bytearray(buf)
    count = rng.choice((1, 1, 2, 4, 16))
    for _ in range(count):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data), f"{count} random bytes"


def truncate(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    cut = rng.randrange(len(buf))
    return buf[:cut], f"cut at {cut}"


def insert_bytes(buf: bytes, rng: random.Random) -> tuple[bytes, str]:
    at = rng.randrange(len(buf))
    count = rng.choice((1, 4, 16, 64))
    return buf[:at] + bytes(rng.randrange(256) for _ in range(count)) + buf[at:], f"+{count}@{at}"


MUTATIONS: dict[str, Callable[[bytes, random.Random], tuple[bytes, str]]] = {
    "field": set_field,
    "bytes": flip_bytes,
    "truncate": truncate,
    "insert": insert_bytes,
}
# Field edits reach past the flatbuffer checks into the semantic ones: most cases are those.
WEIGHTS = {"field": 6, "bytes": 2, "truncate": 1, "insert": 1}


def mutated_model(rng: random.Random) -> tuple[bytes, str]:
    """A seeded mutation of one of the base models, and a description of it."""
    base = rng.choice(sorted(BASES))
    kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    data, detail = MUTATIONS[kind](base_model(base), rng)
    return data, f"{base} {kind} {detail}"


def with_fields(buf: bytes, values: dict[str, int | float]) -> bytes:
    """`buf` with the scalars named as `slots` names them (`tensor0.zero_point[0]`) set: a
    named regression case's exact damage."""
    by_name = {s.what: s for s in slots(buf)}
    data = bytearray(buf)
    for name, value in values.items():
        slot = by_name[name]
        struct.pack_into("<" + slot.fmt, data, slot.pos, value)
    return bytes(data)


def with_vector_length(buf: bytes, what: str, length: int) -> bytes:
    """`buf` with the length word of the vector holding slot `what` (its first element, e.g.
    `tensor1.scale[0]`) set to `length`: more or fewer entries than its neighbours have."""
    slot = {s.what: s for s in slots(buf)}[what]
    data = bytearray(buf)
    struct.pack_into("<I", data, slot.pos - 4, length)
    return bytes(data)
