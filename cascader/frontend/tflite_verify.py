"""Flatbuffer verification of a TFLite file: every table, vector and string a reader of the
model follows lies inside the file.

The generated `tflite` readers do no bounds checks: an offset past the end raises a struct
error at best, and a negative position wraps around and silently reads other bytes. This walks
the tables of the TFLite schema the flow reads, as flatc's verifier does, so a corrupt file
fails here with the place it is corrupt, and the walk is bounded: vectors of tables have a
length limit and the whole walk a table budget, so a hostile file cannot make it slow.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tflite.BuiltinOptions import BuiltinOptions


class FlatbufferError(ValueError):
    """Where the file stops being a well-formed TFLite flatbuffer."""


@dataclass(frozen=True)
class Scalar:
    size: int


@dataclass(frozen=True)
class Vector:
    item_size: int
    max_length: int | None = None


@dataclass(frozen=True)
class String:
    pass


@dataclass(frozen=True)
class Table:
    name: str
    fields: dict[int, tuple[str, object]] = field(default_factory=dict)


@dataclass(frozen=True)
class Tables:
    table: Table
    max_length: int


@dataclass(frozen=True)
class Union:
    """A union's table; `members` names the schemas of the member types that hold offsets
    (others are scalar-only tables: their header is checked, their fields lie inside them)."""

    type_field: int
    members: dict[int, Table]


# Upper bounds no real model comes near (MobileNetV2: 65 operators, 176 buffers), so that a
# hostile length cannot make the walk, or anything after it, take long.
MAX_TENSORS = 1 << 18
MAX_OPERATORS = 1 << 16
MAX_BUFFERS = 1 << 18
MAX_SUBGRAPHS = 1 << 10
MAX_OPERATOR_CODES = 1 << 12
MAX_RANK = 8
MAX_CHANNELS = 1 << 16  # per-axis quantisation entries: Vela's dimensions end at 65535
MAX_TABLES = 1 << 19

_OPTIONS = Union(
    3,
    {
        BuiltinOptions.ReshapeOptions: Table(
            "ReshapeOptions", {0: ("new_shape", Vector(4, MAX_RANK))}
        ),
        BuiltinOptions.SqueezeOptions: Table(
            "SqueezeOptions", {0: ("squeeze_dims", Vector(4, MAX_RANK))}
        ),
        BuiltinOptions.BucketizeOptions: Table("BucketizeOptions", {0: ("boundaries", Vector(4))}),
        BuiltinOptions.ConcatEmbeddingsOptions: Table(
            "ConcatEmbeddingsOptions",
            {
                1: ("num_columns_per_channel", Vector(4)),
                2: ("embedding_dim_per_channel", Vector(4)),
            },
        ),
        BuiltinOptions.VarHandleOptions: Table(
            "VarHandleOptions", {0: ("container", String()), 1: ("shared_name", String())}
        ),
    },
)
_QUANTIZATION = Table(
    "QuantizationParameters",
    {
        0: ("min", Vector(4)),
        1: ("max", Vector(4)),
        2: ("scale", Vector(4, MAX_CHANNELS)),
        3: ("zero_point", Vector(8, MAX_CHANNELS)),
        4: ("details_type", Scalar(1)),
        5: ("details", Union(4, {1: Table("CustomQuantization", {0: ("custom", Vector(1))})})),
        6: ("quantized_dimension", Scalar(4)),
    },
)
# Sparsity is refused by the model checks; only its presence is read.
_TENSOR = Table(
    "Tensor",
    {
        0: ("shape", Vector(4, MAX_RANK)),
        1: ("type", Scalar(1)),
        2: ("buffer", Scalar(4)),
        3: ("name", String()),
        4: ("quantization", _QUANTIZATION),
        5: ("is_variable", Scalar(1)),
        7: ("shape_signature", Vector(4, MAX_RANK)),
        8: ("has_rank", Scalar(1)),
    },
)
_OPERATOR = Table(
    "Operator",
    {
        0: ("opcode_index", Scalar(4)),
        1: ("inputs", Vector(4)),
        2: ("outputs", Vector(4)),
        3: ("builtin_options_type", Scalar(1)),
        4: ("builtin_options", _OPTIONS),
        5: ("custom_options", Vector(1)),
        6: ("custom_options_format", Scalar(1)),
        7: ("mutating_variable_inputs", Vector(1)),
        8: ("intermediates", Vector(4)),
        9: ("large_custom_options_offset", Scalar(8)),
        10: ("large_custom_options_size", Scalar(8)),
        11: ("builtin_options_2_type", Scalar(1)),
        12: ("builtin_options_2", Union(11, {})),
        13: ("debug_metadata_index", Scalar(4)),
    },
)
_SUBGRAPH = Table(
    "SubGraph",
    {
        0: ("tensors", Tables(_TENSOR, MAX_TENSORS)),
        1: ("inputs", Vector(4, MAX_TENSORS)),
        2: ("outputs", Vector(4, MAX_TENSORS)),
        3: ("operators", Tables(_OPERATOR, MAX_OPERATORS)),
        4: ("name", String()),
        5: ("debug_metadata_index", Scalar(4)),
    },
)
_OPERATOR_CODE = Table(
    "OperatorCode",
    {
        0: ("deprecated_builtin_code", Scalar(1)),
        1: ("custom_code", String()),
        2: ("version", Scalar(4)),
        3: ("builtin_code", Scalar(4)),
    },
)
_BUFFER = Table(
    "Buffer", {0: ("data", Vector(1)), 1: ("offset", Scalar(8)), 2: ("size", Scalar(8))}
)
_METADATA = Table("Metadata", {0: ("name", String()), 1: ("buffer", Scalar(4))})
_TENSOR_MAP = Table("TensorMap", {0: ("name", String()), 1: ("tensor_index", Scalar(4))})
_SIGNATURE = Table(
    "SignatureDef",
    {
        0: ("inputs", Tables(_TENSOR_MAP, MAX_TENSORS)),
        1: ("outputs", Tables(_TENSOR_MAP, MAX_TENSORS)),
        2: ("signature_key", String()),
        4: ("subgraph_index", Scalar(4)),
    },
)
MODEL = Table(
    "Model",
    {
        0: ("version", Scalar(4)),
        1: ("operator_codes", Tables(_OPERATOR_CODE, MAX_OPERATOR_CODES)),
        2: ("subgraphs", Tables(_SUBGRAPH, MAX_SUBGRAPHS)),
        3: ("description", String()),
        4: ("buffers", Tables(_BUFFER, MAX_BUFFERS)),
        5: ("metadata_buffer", Vector(4)),
        6: ("metadata", Tables(_METADATA, MAX_BUFFERS)),
        7: ("signature_defs", Tables(_SIGNATURE, MAX_SUBGRAPHS)),
    },
)


class _Walk:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.size = len(buf)
        self.seen: set[tuple[int, str]] = set()

    def _u32(self, pos: int, where: str) -> int:
        self._within(pos, 4, where)
        return struct.unpack_from("<I", self.buf, pos)[0]

    def _within(self, pos: int, size: int, where: str) -> None:
        if pos < 0 or pos + size > self.size:
            raise FlatbufferError(f"{where} lies outside the file (byte {pos} of {self.size})")

    def table(self, pos: int, schema: Table, where: str) -> None:
        if (pos, schema.name) in self.seen:
            return
        self.seen.add((pos, schema.name))
        if len(self.seen) > MAX_TABLES:
            raise FlatbufferError(f"more than {MAX_TABLES} tables")
        self._within(pos, 4, where)
        vtable = pos - struct.unpack_from("<i", self.buf, pos)[0]
        self._within(vtable, 4, f"{where}'s vtable")
        vt_size, obj_size = struct.unpack_from("<HH", self.buf, vtable)
        if vt_size < 4 or vt_size % 2 or obj_size < 4:
            raise FlatbufferError(f"{where} has a malformed vtable")
        self._within(vtable, vt_size, f"{where}'s vtable")
        self._within(pos, obj_size, where)
        entries = struct.unpack_from(f"<{(vt_size - 4) // 2}H", self.buf, vtable + 4)
        # Fields the schema here does not list (an options table's scalars) are read by
        # the generated readers all the same: each must at least start inside its table.
        for index, offset in enumerate(entries):
            if offset and offset >= obj_size:
                raise FlatbufferError(f"{where}'s field {index} lies outside its table")
        for index, (name, kind) in schema.fields.items():
            offset = entries[index] if index < len(entries) else 0
            if offset == 0:
                continue
            width = kind.size if isinstance(kind, Scalar) else 4
            label = f"{where}.{name}"
            if offset + width > obj_size:
                raise FlatbufferError(f"{label} lies outside its table")
            if not isinstance(kind, Scalar):
                self._follow(pos, pos + offset, kind, entries, label)

    def _follow(self, table: int, pos: int, kind: object, entries: tuple, where: str) -> None:
        target = pos + self._u32(pos, where)
        if isinstance(kind, Table):
            self.table(target, kind, where)
        elif isinstance(kind, Union):
            offset = entries[kind.type_field] if kind.type_field < len(entries) else 0
            member = self.buf[table + offset] if offset else 0
            self.table(target, kind.members.get(member, Table(f"union {member}")), where)
        else:
            length = self._u32(target, where)
            item = (
                1 if isinstance(kind, String) else 4 if isinstance(kind, Tables) else kind.item_size
            )
            limit = getattr(kind, "max_length", None)
            if limit is not None and length > limit:
                raise FlatbufferError(f"{where} has {length} entries (at most {limit})")
            self._within(target + 4, length * item, where)
            if isinstance(kind, Tables):
                for j in range(length):
                    at = target + 4 + 4 * j
                    self.table(at + self._u32(at, where), kind.table, f"{where}[{j}]")


def verify_flatbuffer(buf: bytes) -> None:
    """Raise FlatbufferError naming the first part of `buf` a TFLite reader would read
    outside the file (the file identifier is the caller's check)."""
    walk = _Walk(buf)
    walk.table(walk._u32(0, "the root offset"), MODEL, "model")
