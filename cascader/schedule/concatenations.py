"""Concatenations along the channels as one op each (`ir.npu_ops.Concatenation`): the frontend
legalizes a concatenation as one block copy per input, and as separate ops the cascader can
hold the concatenated tensor only whole; as one op with one input per concatenated tensor, a
stripe of its rows reads the same rows of every input and the concatenation cascades."""

from __future__ import annotations

from dataclasses import replace

from cascader.ir.npu_ops import Concatenation, Identity, NpuFunction, NpuOp


def _channel_copy(op: NpuOp) -> bool:
    """A block copy of a whole 4-D input into a channel slice of its OFM."""
    return (
        isinstance(op, Identity)
        and op.operator in ("COPY", "REQUANTIZE")
        and op.ofm_fill is None
        and not op.ifm_offset
        and not op.ifm_strides
        and len(op.ifm.shape) == len(op.ofm.shape) == 4
        and tuple(op.region) == tuple(op.ifm.shape)
        and len(op.ofm_offset) == 4
        and not any(op.ofm_offset[:3])
        and tuple(op.ifm.shape[:3]) == tuple(op.ofm.shape[:3])
    )


def _concatenation(copies: list[Identity]) -> Concatenation | None:
    """The copies as one op when they fill their OFM's channels in order, else None."""
    offsets = tuple(copy.ofm_offset[3] for copy in copies)
    ends = [o + c.ifm.shape[3] for o, c in zip(offsets, copies, strict=True)]
    if offsets != (0, *ends[:-1]) or ends[-1] != copies[0].ofm.shape[3]:
        return None
    found = Concatenation(copies[0].name, tuple(c.ifm for c in copies), copies[0].ofm, offsets)
    return found if found.copies == tuple(copies) else None


def join_concatenations(function: NpuFunction) -> NpuFunction:
    """The function with the block copies of each concatenation along the channels (one
    after another, writing one OFM) replaced by one `Concatenation`."""
    ops: list[NpuOp] = []
    group: list[Identity] = []

    def close() -> None:
        joined = _concatenation(group) if len(group) > 1 else None
        ops.extend([joined] if joined is not None else group)
        group.clear()

    for op in function.ops:
        if group and not (_channel_copy(op) and op.ofm == group[0].ofm):
            close()
        if _channel_copy(op):
            group.append(op)
        else:
            ops.append(op)
    close()
    return replace(function, ops=tuple(ops))
