"""An operation's description is remembered per set of facts it is made of, so every fact must
tell descriptions apart: operations that differ in any one of them get different descriptions
however warm the memo is, and each description survives a round trip through Vela's API."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ethosu.vela.api import NpuActivation, NpuActivationOp, NpuLayout, NpuResamplingMode

from cascader.ethosu.npu_op import NpuOpDescription

BASE = [
    NpuOpDescription("conv2d", (8, 8, 16), (8, 8, 32), (3, 3), part_kernel_first=True),
    NpuOpDescription("conv2d", (9, 7, 3), (4, 3, 8), (3, 3), (2, 2), part_kernel_first=False),
    NpuOpDescription("depthwise", (8, 8, 16), (8, 8, 16), (3, 3), dilation=(2, 2)),
    NpuOpDescription("pooling", (8, 8, 16), (4, 4, 16), (2, 2), (2, 2), sub_op="MAX"),
    NpuOpDescription("pooling", (8, 8, 16), (1, 1, 16), (8, 8), sub_op="AVERAGE"),
    NpuOpDescription(
        "pooling", (8, 8, 16), (8, 8, 1), sub_op="REDUCE_SUM", ifm_dtype="int32", ofm_dtype="int32"
    ),
    NpuOpDescription("elementwise", (8, 8, 16), (8, 8, 16), sub_op="ADD", ifm2_shape=(1, 1, 16)),
    NpuOpDescription(
        "elementwise",
        (8, 8, 16),
        (8, 8, 16),
        sub_op="MUL",
        ifm2_shape=(1, 1, 1),
        ifm2_scalar=True,
        activation="CLIP",
    ),
    NpuOpDescription(
        "pooling",
        (8, 8, 16),
        (8, 8, 16),
        sub_op="AVERAGE",
        activation="LUT",
        ifm_layout="NHCWB16",
        ofm_layout="NHCWB16",
    ),
    NpuOpDescription(
        "pooling",
        (4, 4, 16),
        (8, 8, 16),
        sub_op="AVERAGE",
        upscale="NEAREST",
        ifm_dtype="int16",
        ofm_dtype="int16",
        scaled=False,
    ),
]


@pytest.mark.parametrize("desc", BASE, ids=lambda d: f"{d.kind}-{d.sub_op or d.ofm_shape}")
def test_descriptions_survive_the_round_trip_warm_and_cold(desc: NpuOpDescription) -> None:
    for _ in range(2):  # the second time from the memo
        assert NpuOpDescription.from_npu_op(desc.to_npu_op()) == desc


def _variants(desc: NpuOpDescription):
    """(a change to a Vela operation made from `desc`, the description it should give)."""
    h, w, d = desc.ofm_shape

    def ofm_shape(op):
        op.ofm.shape = op.ofm.shape._replace(height=h + 1)

    def ifm_shape(op):
        op.ifm.shape = op.ifm.shape._replace(width=desc.ifm_shape[1] + 2)

    def ofm_layout(op):
        op.ofm.layout = NpuLayout.NHWC if desc.ofm_layout == "NHCWB16" else NpuLayout.NHCWB16

    def ifm_dtype(op):
        op.ifm.data_type = type(op.ifm.data_type).INT16

    def scaled(op):
        op.ofm.quantization = None

    def activation(op):
        op.activation = NpuActivation(NpuActivationOp.SIGMOID)

    def upscale(op):
        op.ifm_upscale = NpuResamplingMode.TRANSPOSE

    def kernel(op):
        k = op.kernel
        k.stride_x, k.dilation_y = k.stride_x + 1, k.dilation_y + 1

    yield ofm_shape, replace(desc, ofm_shape=(h + 1, w, d))
    yield ifm_shape, replace(desc, ifm_shape=(desc.ifm_shape[0], desc.ifm_shape[1] + 2,
                                              desc.ifm_shape[2]))  # fmt: skip
    other = "NHWC" if desc.ofm_layout == "NHCWB16" else "NHCWB16"
    yield ofm_layout, replace(desc, ofm_layout=other)
    yield ifm_dtype, replace(desc, ifm_dtype="int16")
    yield scaled, replace(desc, scaled=False)
    yield activation, replace(desc, activation="SIGMOID")
    yield upscale, replace(desc, upscale="TRANSPOSE")
    yield kernel, replace(desc, stride=(desc.stride[0], desc.stride[1] + 1),
                          dilation=(desc.dilation[0] + 1, desc.dilation[1]))  # fmt: skip


@pytest.mark.parametrize("desc", BASE, ids=lambda d: f"{d.kind}-{d.sub_op or d.ofm_shape}")
def test_every_fact_tells_descriptions_apart(desc: NpuOpDescription) -> None:
    NpuOpDescription.from_npu_op(desc.to_npu_op())  # warm
    for change, expected in _variants(desc):
        op = desc.to_npu_op()
        change(op)
        assert NpuOpDescription.from_npu_op(op) == expected, change.__name__
        assert NpuOpDescription.from_npu_op(desc.to_npu_op()) == desc


def test_a_non_block_operation_is_refused() -> None:
    from ethosu.vela.api import NpuAddressRange, NpuDmaOperation

    dma = NpuDmaOperation(NpuAddressRange(0, 0, 16), NpuAddressRange(1, 0, 16))
    with pytest.raises(TypeError, match="not an NPU block operation"):
        NpuOpDescription.from_npu_op(dma)
