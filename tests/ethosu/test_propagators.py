"""Every op's propagators, checked against the reference's own account of what an output
stripe reads (`op_reads`): for first, interior and last stripes of several heights, widths and
depths, the propagated input box contains the box the op reads, and equals it for a plain
convolution, pool or elementwise op. Inputs an op reads under another shape (softmax's views)
are read whole."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from sessions import prepared_model

from cascader.ethosu.propagation import reads_through_view
from cascader.ir.boxes import Box
from cascader.ir.layout import propagate_box
from cascader.ir.npu_ops import (
    BinaryElementwise,
    Conv2D,
    NpuOp,
    Pooling,
    UnaryElementwise,
    feature_inputs,
)
from cascader.pipeline import PreparedModel
from cascader.reference.run import op_reads
from cascader.testing.networks import CATALOGUE, single_op_model
from cascader.testing.shared import shared_dir

_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
_SHARED = (
    "ad_autoencoder",
    "ic_resnet8",
    "kws_dscnn",
    "vww_mobilenet_v1_025",
    "mobilenet_v2_100_224",
)


@functools.cache
def _prepared(name: str) -> PreparedModel:
    if name in CATALOGUE:
        model = CATALOGUE[name]().build()
    elif name == "example":
        model = _EXAMPLE.read_bytes()
    elif name == "MEAN-80x80":  # two row blocks, the second read at an offset
        model = single_op_model("MEAN", shape=(1, 80, 80, 4), axes=(1, 2))
    else:
        root = shared_dir()
        path = root / "models" / f"{name}.tflite" if root else None
        if path is None or not path.is_file():
            pytest.skip("shared models not present")
        model = path.read_bytes()
    return prepared_model(model, "ethos-u55-256")


def _spans(size: int) -> set[tuple[int, int]]:
    """(start, length): first, interior and last stripes of lengths 1, 2, 3 and the whole."""
    spans = {(0, size)}
    for length in (1, 2, 3):
        if length < size:
            spans |= {(0, length), (length, min(length, size - length)), (size - length, length)}
    return spans


def _stripes(shape: tuple[int, ...]) -> list[Box]:
    """Stripes along H, along W and (in whole bricks) along C; whole along the other axes."""
    boxes = []
    for axis in (1, 2):
        for start, length in _spans(shape[axis]):
            offset, size = [0, 0, 0, 0], list(shape)
            offset[axis], size[axis] = start, length
            boxes.append(Box(tuple(offset), tuple(size)))
    depth = shape[3]
    for start in sorted({0, 16, (depth - 1) // 16 * 16}):
        if depth > 16 and start < depth:
            boxes.append(Box((0, 0, 0, start), (*shape[:3], min(16, depth - start))))
    return boxes


def propagated_box(propagator, stripe: Box, ofm, ifm) -> Box:
    return Box(*propagate_box(propagator, stripe.start, stripe.shape, ofm, ifm))


def _plain(op: NpuOp) -> bool:
    if isinstance(op, Conv2D):
        return op.upscale == "NONE" and op.kind != "fully_connected"
    if isinstance(op, Pooling):
        return op.upscale == "NONE"
    return isinstance(op, BinaryElementwise | UnaryElementwise)


def _check(name: str) -> int:
    net = _prepared(name).network
    checked = 0
    for part in net.graph.parts:
        op = net.ops[part.id]
        inputs = feature_inputs(op)
        viewed = any(reads_through_view(op, t) for t in inputs)
        for stripe in _stripes(op.ofm.shape):
            reads = (None,) * len(inputs) if viewed else op_reads(op, stripe)
            for slot, (tensor, read) in enumerate(zip(inputs, reads, strict=True)):
                got = propagated_box(part.propagators[slot], stripe, op.ofm, tensor)
                where = f"{name}: {op.name} stripe {stripe} input {slot}"
                if viewed:
                    assert got == Box.whole(tensor.shape), f"{where}: {got} is not all of it"
                elif read is not None and 0 not in read.shape:
                    assert got.contains(read), f"{where}: reads {read}, propagated {got}"
                    if _plain(op):
                        assert got == read, f"{where}: reads {read}, propagated {got}"
                checked += 1
    return checked


@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_builder_case_propagators_cover_what_each_stripe_reads(case: str) -> None:
    assert _check(case) > 0


@pytest.mark.parametrize("name", ["example", "MEAN-80x80", *_SHARED])
def test_model_propagators_cover_what_each_stripe_reads(name: str) -> None:
    assert _check(name) > 0


def test_bilinear_resize_stripe_reads_its_own_input_rows() -> None:
    """A 2x bilinear resize runs as a 2x2 average over the 2x upscaled IFM: output rows 2-3
    read input rows 1-2 (the second because of the bottom padding), not rows 2-4."""
    net = _prepared("RESIZE_BILINEAR").network
    (part,) = (p for p in net.graph.parts if isinstance(net.ops[p.id], Pooling))
    op = net.ops[part.id]
    stripe = Box((0, 2, 0, 0), (1, 2, *op.ofm.shape[2:]))
    got = propagated_box(part.propagators[0], stripe, op.ofm, op.ifm)
    assert (got.start[1], got.shape[1]) == (1, 2)
    assert got == op_reads(op, stripe)[0]


def test_softmax_sum_reads_every_channel() -> None:
    net = _prepared("SOFTMAX").network
    (part,) = (p for p in net.graph.parts if getattr(net.ops[p.id], "pool_type", "") == "SUM")
    op = net.ops[part.id]
    got = propagated_box(part.propagators[0], Box.whole(op.ofm.shape), op.ofm, op.ifm)
    assert got.shape[3] == op.ifm.shape[3] > 1


def test_mean_second_row_block_reads_rows_51_to_79() -> None:
    net = _prepared("MEAN-80x80").network
    sums = [p for p in net.graph.parts if isinstance(net.ops[p.id], Conv2D)]
    second = next(p for p in sums if net.ops[p.id].ifm_offset[1] == 51)
    op = net.ops[second.id]
    got = propagated_box(second.propagators[0], Box.whole(op.ofm.shape), op.ofm, op.ifm)
    assert (got.start[1], got.shape[1]) == (51, 29)
