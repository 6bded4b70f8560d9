"""Concatenation inputs written in place: the op producing an input of a concatenation writes
its output straight into its slice of the concatenated tensor, as Vela's scheduler has it,
so the input takes no buffer of its own and its block copy moves nothing. A concatenation
along the channels is one op by then (`concatenations`), its inputs copied stripe by stripe
so that it can cascade; which of its inputs are written in place is each schedule's choice
(`plans.inputs_in_place`), as only its plans say whether the tensors are whole. What is
left here are the block copies of the other concatenations.

Only an input that the concatenation alone reads is written in place: one that other ops read
too (a U-Net's skip, read by the next pooling as well) would keep the whole concatenated
tensor live from its producer on, where copying it late costs a fraction of that."""

from __future__ import annotations

from dataclasses import replace

from cascader.ir.npu_ops import Identity, NpuFunction, NpuOp, feature_inputs


def _moves_whole_input(op: NpuOp) -> bool:
    """A concatenation's block copy of its whole input, unscaled, into a slice of its OFM."""
    return (
        isinstance(op, Identity)
        and op.operator == "COPY"
        and bool(op.ofm_offset)
        and op.ofm_fill is None
        and not op.ifm_offset
        and not op.ifm_strides
        and tuple(op.region or op.ifm.shape) == tuple(op.ifm.shape)
        and (op.ifm.quant, op.ifm.dtype) == (op.ofm.quant, op.ofm.dtype)
    )


def write_in_place(function: NpuFunction) -> NpuFunction:
    """The function with each concatenation input that an NPU op (not a copy) produces and
    only the concatenation reads written in place: its copy becomes an IN_PLACE identity,
    and the input takes the layout of the concatenated tensor, whose buffer holds it."""
    ops = list(function.ops)
    latest: dict[str, int] = {}  # name -> the op that last wrote it (names may repeat)
    producer_of: list[list[int]] = []  # per op, per input: its producer's index or -1
    readers: dict[int, int] = {}  # op index -> how many reads its output has
    for index, op in enumerate(ops):
        found = [latest.get(t.name, -1) for t in feature_inputs(op)]
        producer_of.append(found)
        for p in found:
            readers[p] = readers.get(p, 0) + 1
        latest[op.ofm.name] = index
    for name in function.outputs:
        if name in latest:
            readers[latest[name]] = readers.get(latest[name], 0) + 1  # the host reads it
    for index, op in enumerate(ops):
        producer = producer_of[index][0]
        if (
            not _moves_whole_input(op)
            or producer < 0
            or isinstance(ops[producer], Identity)
            or readers.get(producer) != 1
        ):
            continue
        # the producer's own tensor (a copy moves bytes: its IFM's label may differ)
        placed = replace(ops[producer].ofm, layout=op.ofm.layout)
        ops[producer] = replace(ops[producer], ofm=placed)
        ops[index] = replace(op, operator="IN_PLACE", ifm=placed)
    return replace(function, ops=tuple(ops))
