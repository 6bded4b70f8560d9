"""A transposed convolution (its IFM read 2x upscaled, zeros inserted) runs in row stripes of
whole columns: a stripe whose window starts on an inserted zero row starts at the next IFM
row with one more row of padding. The box and padding a schedule programs for each stripe are
what the reference reads and pads, and the reference computes every such stripe as the whole
op does; the schedules that stripe it are proven on the simulator in
`test_concat_in_cascades`."""

from __future__ import annotations

import numpy as np
import pytest
from sessions import prepared_model

from cascader.ir.boxes import Box, input_boxes
from cascader.ir.errors import ScheduleError
from cascader.ir.npu_ops import Conv2D
from cascader.reference.conv import conv2d, conv2d_box, conv2d_reads
from cascader.testing.networks import CATALOGUE

U55 = "ethos-u55-256"


def _transposed(case: str) -> Conv2D:
    net = prepared_model(CATALOGUE[case]().build(), U55).network
    (op,) = [op for op in net.ops if isinstance(op, Conv2D) and op.upscale == "ZEROS"]
    return op


@pytest.mark.parametrize("case", ["TRANSPOSE_CONV", "TRANSPOSE_CONV-valid"])
def test_row_stripes_read_what_the_reference_reads(case: str) -> None:
    op = _transposed(case)
    n, height, width, depth = op.ofm.shape
    rng = np.random.default_rng(3)
    ifm = rng.integers(-128, 128, op.ifm.shape, dtype=np.int8)
    whole = conv2d(op, ifm)
    odd_starts = 0
    for start in range(height):
        for rows in range(1, height - start + 1):
            stripe = Box((0, start, 0, 0), (n, rows, width, depth))
            (box,), (top, left, bottom, right) = input_boxes(op, stripe)
            assert box == conv2d_reads(op, stripe), (start, rows)
            assert (left, right) == (op.padding.left, op.padding.right)
            # the upscaled rows the NPU reads: padding, then the IFM box's rows, cut to the
            # stripe's window
            used = rows - 1 + op.kernel.height - top - bottom
            assert 0 < used <= 2 * box.shape[1]
            if start > op.padding.top and (start - op.padding.top) % 2:  # on a zero row
                assert top == 1
                odd_starts += 1
            got = conv2d_box(op, ifm[box.slices()], stripe)
            np.testing.assert_array_equal(got, whole[stripe.slices()])
    assert odd_starts > 0  # some stripes start on an inserted zero row


def test_the_whole_op_reads_as_before() -> None:
    op = _transposed("TRANSPOSE_CONV")
    (box,), padding = input_boxes(op, Box.whole(op.ofm.shape))
    assert box == Box.whole(op.ifm.shape)
    assert padding == (op.padding.top, op.padding.left, op.padding.bottom, op.padding.right)


def test_columns_stay_whole() -> None:
    op = _transposed("TRANSPOSE_CONV")
    n, height, width, depth = op.ofm.shape
    with pytest.raises(ScheduleError):
        input_boxes(op, Box((0, 0, 0, 0), (n, height, width - 2, depth)))
