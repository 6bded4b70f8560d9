"""Legalization beyond one-op-per-composite: block copies (concatenate, split, strided_slice,
pad), Vela's MEAN and RESIZE rewrites, depthwise convolutions with a depth multiplier."""

from __future__ import annotations

import numpy as np
import pytest
from model_cases import act, const, one_op_model

from cascader.frontend.legalize import legalize
from cascader.frontend.mean import mean_multiplier
from cascader.frontend.partition import host_ops, partition_for_ethosu
from cascader.frontend.tflite_import import import_tflite
from cascader.ir.npu_ops import BinaryElementwise, Conv2D, Identity, Pooling, Quant
from cascader.testing.networks import single_op_model
from cascader.verify.litert import compare_with_litert

X = act("x", (1, 8, 8, 4), 0.05, -3)
I32 = np.int32


def _function(buf: bytes):
    part = partition_for_ethosu(import_tflite(buf))
    assert host_ops(part) == []
    (function,) = legalize(part)
    assert all(isinstance(op, Identity) for op in function.ops)
    return function


def test_concatenate_writes_each_input_into_its_channel_slice():
    buf = one_op_model(
        "CONCATENATION",
        [X, act("x2", (1, 8, 8, 2), 0.05, -3), act("x3", (1, 8, 8, 4), 0.1, 2)],
        [act("y", (1, 8, 8, 10), 0.05, -3)],
        {"axis": 3},
    )
    function = _function(buf)
    ops = function.ops
    assert [op.ifm.name for op in ops] == ["x", "x2", "x3"]
    assert {op.ofm.name for op in ops} == {function.outputs[0]}
    assert all(op.ofm.shape == (1, 8, 8, 10) for op in ops)
    assert [op.ofm_offset for op in ops] == [(0, 0, 0, 0), (0, 0, 0, 4), (0, 0, 0, 6)]
    assert [op.region for op in ops] == [(1, 8, 8, 4), (1, 8, 8, 2), (1, 8, 8, 4)]
    # Same quantisation: a plain copy; the third input is rescaled on the way.
    assert [op.operator for op in ops] == ["COPY", "COPY", "REQUANTIZE"]
    assert ops[2].ifm.quant == Quant(pytest.approx(0.1), 2)


def test_concatenate_along_height():
    buf = one_op_model(
        "CONCATENATION",
        [X, act("x2", (1, 3, 8, 4), 0.05, -3)],
        [act("y", (1, 11, 8, 4), 0.05, -3)],
        {"axis": 1},
    )
    ops = _function(buf).ops
    assert [op.ofm_offset for op in ops] == [(0, 0, 0, 0), (0, 8, 0, 0)]


def test_split_reads_each_output_from_its_slice():
    buf = one_op_model(
        "SPLIT",
        [const("axis", np.array(3, I32)), X],
        [act("y0", (1, 8, 8, 2), 0.05, -3), act("y1", (1, 8, 8, 2), 0.05, -3)],
        {"num_splits": 2},
    )
    function = _function(buf)
    ops = function.ops
    assert tuple(op.ofm.name for op in ops) == function.outputs
    assert all(op.ifm.name == "x" and op.ifm.shape == (1, 8, 8, 4) for op in ops)
    assert [op.ifm_offset for op in ops] == [(0, 0, 0, 0), (0, 0, 0, 2)]
    assert [op.region for op in ops] == [(1, 8, 8, 2)] * 2
    assert all(op.operator == "COPY" for op in ops)


def test_strided_slice_reads_a_strided_block():
    buf = one_op_model(
        "STRIDED_SLICE",
        [
            X,
            const("b", np.array([0, 1, 2, 0], I32)),
            const("e", np.array([1, 7, 8, 4], I32)),
            const("s", np.array([1, 2, 1, 1], I32)),
        ],
        [act("y", (1, 3, 6, 4), 0.05, -3)],
    )
    copy = _function(buf).ops[0]
    assert (copy.operator, copy.ifm.name) == ("COPY", "x")
    assert copy.ifm_offset == (0, 1, 2, 0)
    assert copy.ifm_strides == (1, 2, 1, 1)
    assert copy.region == copy.ofm.shape == (1, 3, 6, 4)


def test_pad_writes_into_a_zero_point_filled_ofm():
    pads = np.array([[0, 0], [1, 2], [3, 0], [0, 0]], I32)
    buf = one_op_model("PAD", [X, const("p", pads)], [act("y", (1, 11, 11, 4), 0.05, -3)])
    (copy,) = _function(buf).ops
    assert copy.operator == "COPY" and copy.ofm.shape == (1, 11, 11, 4)
    assert copy.region == (1, 8, 8, 4)
    assert copy.ofm_offset == (0, 1, 3, 0)
    assert copy.ofm_fill == -3


def _mean_model(shape, axes, out_shape, out_scale=0.02, out_zp=5) -> bytes:
    return one_op_model(
        "MEAN",
        [act("x", shape, 0.05, -3), const("axes", np.array(axes, I32))],
        [act("y", out_shape, out_scale, out_zp)],
        {"keep_dims": True},
    )


def _legalized(buf: bytes):
    part = partition_for_ethosu(import_tflite(buf))
    assert host_ops(part) == []
    (function,) = legalize(part)
    return function


def test_mean_over_hw_is_a_depthwise_sum_then_a_scaling_mul():
    function = _legalized(_mean_model((1, 3, 5, 8), [1, 2], (1, 1, 1, 8)))
    conv, mul = function.ops
    assert isinstance(conv, Conv2D) and conv.kind == "depthwise_conv2d"
    assert (conv.kernel.height, conv.kernel.width) == (3, 5)
    assert conv.ofm.dtype == "int32" and conv.ofm.shape == (1, 1, 1, 8)
    np.testing.assert_array_equal(conv.weights, np.ones((8, 3, 5, 1)))
    assert set(conv.multipliers.tolist()) == {1} and set(conv.shifts.tolist()) == {0}
    assert isinstance(mul, BinaryElementwise) and mul.operator == "MUL"
    assert mul.ifm.name == conv.ofm.name and mul.ofm.name == function.outputs[0]
    multiplier, shift = mul.ifm2_scalar, mul.rescale[1]
    assert mul.rescale[0] == 1
    ifm_s, ofm_s = (float(np.float32(v)) for v in (0.05, 0.02))
    assert multiplier / 2**shift == pytest.approx(ifm_s / ofm_s / 15, rel=1e-6)
    assert (multiplier, shift) == mean_multiplier(conv.ifm.quant, mul.ofm.quant, 15)


def test_tall_mean_sums_row_blocks_and_adds_them():
    """Vela's kernels are at most 64 rows: 150 rows -> sums over 64, 64 and 22 rows."""
    function = _legalized(_mean_model((1, 150, 3, 4), [1], (1, 1, 3, 4)))
    convs = [op for op in function.ops if isinstance(op, Conv2D)]
    adds = [op for op in function.ops if op.op_family == "binary_elementwise"][:-1]
    assert [c.kernel.height for c in convs] == [64, 64, 22]
    assert [c.ifm_offset for c in convs] == [(0, 0, 0, 0), (0, 64, 0, 0), (0, 128, 0, 0)]
    assert [c.ifm_region for c in convs] == [(1, 64, 3, 4), (1, 64, 3, 4), (1, 22, 3, 4)]
    assert [(a.operator, a.ifm.name, a.ifm2.name) for a in adds] == [
        ("ADD", convs[2].ofm.name, convs[1].ofm.name),
        ("ADD", convs[0].ofm.name, adds[0].ofm.name),
    ]
    assert function.ops[-1].ifm.name == adds[-1].ofm.name


def test_mean_over_channels_views_them_as_width():
    function = _legalized(_mean_model((1, 1, 5, 16), [3], (1, 1, 5, 1)))
    conv, _ = function.ops
    assert conv.ifm.shape == (1, 5, 16, 1)
    assert (conv.kernel.height, conv.kernel.width) == (1, 16)
    assert conv.ofm.shape == (1, 5, 1, 1)


def _transpose_conv_reference(x, w_ohwi, stride, out_hw):
    """TFLite TRANSPOSE_CONV on integers: scatter each IFM element through the kernel."""
    _, h, w, _ = x.shape
    o, kh, kw, _ = w_ohwi.shape
    pad_h = max((h - 1) * stride + kh - out_hw[0], 0) // 2
    pad_w = max((w - 1) * stride + kw - out_hw[1], 0) // 2
    out = np.zeros((out_hw[0] + kh + stride, out_hw[1] + kw + stride, o), np.int64)
    for iy in range(h):
        for ix in range(w):
            patch = np.einsum("ohwi,i->hwo", w_ohwi, x[0, iy, ix])
            out[iy * stride : iy * stride + kh, ix * stride : ix * stride + kw] += patch
    return out[pad_h : pad_h + out_hw[0], pad_w : pad_w + out_hw[1]]


def _npu_conv(x, conv):
    """The legalized op on integers: zero-upscale, pad, stride-1 correlation."""
    s = 2 if conv.upscale == "ZEROS" else 1
    _, h, w, c = x.shape
    up = np.zeros((h * s, w * s, c), np.int64)
    up[::s, ::s] = x[0]
    p = conv.padding
    up = np.pad(up, ((p.top, p.bottom), (p.left, p.right), (0, 0)))
    kh, kw = conv.kernel.height, conv.kernel.width
    rows, cols = up.shape[0] - kh + 1, up.shape[1] - kw + 1
    out = np.zeros((rows, cols, conv.weights.shape[0]), np.int64)
    for y in range(rows):
        for x_ in range(cols):
            out[y, x_] = np.einsum("ohwi,hwi->o", conv.weights, up[y : y + kh, x_ : x_ + kw])
    return out


@pytest.mark.parametrize(
    ("stride", "kernel", "padding", "out_hw"),
    [
        (2, 3, "SAME", (10, 12)),
        (2, 3, "VALID", (11, 13)),
        (2, 2, "SAME", (10, 12)),
        (1, 3, "SAME", (5, 6)),
    ],
)
def test_transpose_conv_is_a_conv_over_a_zero_upscaled_ifm(stride, kernel, padding, out_hw):
    rng = np.random.default_rng(7)
    w_ohwi = rng.integers(-127, 128, (3, kernel, kernel, 2), dtype=np.int8)
    x_shape = (1, 5, 6, 2)
    buf = one_op_model(
        "TRANSPOSE_CONV",
        [
            const("os", np.array([1, *out_hw, 3], I32)),
            const("w", w_ohwi, 0.01),
            act("x", x_shape, 0.05, -3),
        ],
        [act("y", (1, *out_hw, 3), 0.1, 4)],
        {"padding": padding, "stride": (stride, stride)},
    )
    (conv,) = _legalized(buf).ops
    assert isinstance(conv, Conv2D) and conv.kind == "conv2d"
    assert conv.upscale == ("ZEROS" if stride > 1 else "NONE")
    assert (conv.kernel.stride_h, conv.kernel.stride_w) == (1, 1)
    x = rng.integers(-128, 128, x_shape)
    expected = _transpose_conv_reference(x, w_ohwi.astype(np.int64), stride, out_hw)
    np.testing.assert_array_equal(_npu_conv(x, conv), expected)


def _resize_model(kind, in_hw, out_hw, align_corners=False, half_pixel=False, out_q=(0.05, -3)):
    return one_op_model(
        kind,
        [act("x", (1, *in_hw, 4), 0.05, -3), const("size", np.array(out_hw, I32))],
        [act("y", (1, *out_hw, 4), *out_q)],
        {"align_corners": align_corners, "half_pixel_centers": half_pixel},
    )


def test_nearest_resize_x4_is_two_nearest_upscaling_average_pools():
    ops = _legalized(_resize_model("RESIZE_NEAREST_NEIGHBOR", (4, 5), (16, 20))).ops
    assert [type(op) for op in ops] == [Pooling, Pooling]
    assert [op.ofm.shape for op in ops] == [(1, 8, 10, 4), (1, 16, 20, 4)]
    assert ops[1].ifm.name == ops[0].ofm.name
    for op in ops:
        assert (op.pool_type, op.upscale, op.rounding) == ("AVG", "NEAREST", "NATURAL")
        assert (op.kernel.height, op.kernel.width) == (1, 1)


def test_bilinear_resize_ends_in_a_padded_factor_sized_average():
    ops = _legalized(_resize_model("RESIZE_BILINEAR", (4, 5), (16, 20), out_q=(0.04, 1))).ops
    last = ops[-1]
    assert len(ops) == 2 and isinstance(last, Pooling)
    assert (last.kernel.height, last.kernel.width) == (4, 4)
    assert (last.padding.bottom, last.padding.right, last.padding.top) == (3, 3, 0)
    assert last.ofm.quant == Quant(pytest.approx(0.04), 1)


def test_nearest_align_corners_picks_a_tap_with_a_depthwise_conv():
    ops = _legalized(
        _resize_model("RESIZE_NEAREST_NEIGHBOR", (4, 5), (7, 9), align_corners=True)
    ).ops
    (conv,) = ops
    assert isinstance(conv, Conv2D) and conv.upscale == "NEAREST"
    assert conv.weights.sum() == 4 and conv.weights[:, 1, 1, 0].tolist() == [1] * 4


def test_half_pixel_bilinear_is_a_depthwise_conv_per_output_phase_over_the_edge_padded_ifm():
    ops = _legalized(_resize_model("RESIZE_BILINEAR", (3, 5), (6, 10), half_pixel=True)).ops
    convs = [op for op in ops if isinstance(op, Conv2D)]
    assert [c.ifm_offset for c in convs] == [(0, a, b, 0) for a in (0, 1) for b in (0, 1)]
    assert all(c.ifm.shape == (1, 5, 7, 4) and c.ifm_region == (1, 4, 6, 4) for c in convs)
    assert all(c.kind == "depthwise_conv2d" and c.ifm.quant.zero_point == 0 for c in convs)
    assert convs[0].weights[0, :, :, 0].tolist() == [[2, 6], [6, 18]]
    assert {int(c.weights.sum()) for c in convs} == {32 * 4}
    assert ops[-1].operator == "RESHAPE" and ops[-1].ifm.shape == (1, 3, 10, 8)


@pytest.mark.parametrize(
    ("in_hw", "out_q"), [((3, 5), (0.05, -3)), ((8, 2), (0.05, 100)), ((4, 4), (0.07, 9))]
)
def test_half_pixel_bilinear_matches_litert_bit_exactly(in_hw, out_q):
    out_hw = (2 * in_hw[0], 2 * in_hw[1])
    buf = _resize_model("RESIZE_BILINEAR", in_hw, out_hw, half_pixel=True, out_q=out_q)
    (stats,) = compare_with_litert(buf, samples=3, kernels="reference")
    assert stats.max_abs_diff == 0, stats


def test_resize_from_1x1_broadcasts_by_adding_zeros():
    (add,) = _legalized(_resize_model("RESIZE_BILINEAR", (1, 1), (8, 8))).ops
    assert isinstance(add, BinaryElementwise) and add.operator == "ADD"
    assert add.ifm_scalar == 0 and add.ifm2.shape == (1, 1, 1, 4)


def test_depth_multiplier_is_a_conv_reading_one_ifm_channel_per_ofm_channel():
    buf = single_op_model("DEPTHWISE_CONV_2D", shape=(1, 6, 6, 3), depth_multiplier=4)
    (conv,) = _legalized(buf).ops
    assert isinstance(conv, Conv2D) and conv.kind == "conv2d"
    assert conv.weights.shape == (12, 3, 3, 3) and conv.ofm.shape == (1, 6, 6, 12)
    reads = np.abs(conv.weights.astype(np.int64)).sum(axis=(1, 2)) > 0  # (OFM, IFM channel)
    np.testing.assert_array_equal(reads, np.repeat(np.eye(3, dtype=bool), 4, axis=0))
