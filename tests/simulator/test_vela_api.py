"""Streams from Vela's public register-level API (what this project's code generator calls),
checked against the project's numpy reference: a convolution over an IFM read through four
tiles, in NHWC and NHCWB16, depth-first and part-kernel-first, dilated, on U55 and U65-512
(two cores, per-core weight and scale streams)."""

from __future__ import annotations

import numpy as np
import pytest
from ethosu.vela import api

from cascader.ir.npu_ops import Activation, Conv2D, Kernel, NpuTensor, Padding, Quant
from cascader.reference.conv import conv2d
from cascader.simulator import RegionImage, TensorPlacement, read_tensor, simulate, write_tensor

ACCELERATORS = {
    "ethos-u55-256": api.NpuAccelerator.Ethos_U55_256,
    "ethos-u65-512": api.NpuAccelerator.Ethos_U65_512,
}
CORES = {"ethos-u55-256": 1, "ethos-u65-512": 2}


def _feature_map(shape, address, layout, zero_point, tiled: bool) -> api.NpuFeatureMap:
    fm = api.NpuFeatureMap()
    fm.data_type = api.NpuDataType.INT8
    fm.region = 1
    fm.shape = api.NpuShape3D(*shape)
    fm.layout = layout
    fm.quantization = api.NpuQuantization(scale_f32=1.0, zero_point=zero_point)
    height, width, depth = shape
    if layout == api.NpuLayout.NHCWB16:
        stride_x, stride_y = 16, width * 16 * -(-depth // 16)
    else:
        stride_x, stride_y = depth, width * depth
    if tiled:  # four tiles over the one tensor: each base is the address of its first element
        h0, h1, w0 = height // 2, height // 3, width // 2
        bases = [address, address + w0 * stride_x, address + h0 * stride_y]
        bases.append(address + h1 * stride_y + w0 * stride_x)
        fm.tiles = api.NpuTileBox(h0, h1, w0, bases)
    else:
        fm.tiles = api.NpuTileBox(height, height, width, [address, 0, 0, 0])
    return fm


@pytest.mark.parametrize("accelerator", list(ACCELERATORS))
@pytest.mark.parametrize("layout", [api.NpuLayout.NHWC, api.NpuLayout.NHCWB16])
@pytest.mark.parametrize(
    "traversal", [api.NpuBlockTraversal.DEPTH_FIRST, api.NpuBlockTraversal.PART_KERNEL_FIRST]
)
@pytest.mark.parametrize("dilation", [1, 2])
def test_api_convolution_matches_reference(accelerator, layout, traversal, dilation) -> None:
    rng = np.random.default_rng(dilation)
    ifm_shape, ofm_shape = (12, 10, 20), (12, 10, 24)
    kernel = Kernel(3, 3, 1, 1, dilation, dilation)
    pad = dilation  # SAME
    weights = rng.integers(-127, 128, (24, 3, 3, 20)).astype(np.int8)
    biases = rng.integers(-5000, 5000, 24).astype(np.int64)
    multipliers = rng.integers(1 << 29, 1 << 31, 24).astype(np.int64)
    shifts = rng.integers(35, 40, 24).astype(np.int64)
    ifm = rng.integers(-128, 128, (1, *ifm_shape)).astype(np.int8)

    op = api.NpuConv2DOperation()
    op.ifm = _feature_map(ifm_shape, 0, layout, 3, tiled=True)
    op.ofm = _feature_map(ofm_shape, 8192, layout, -2, tiled=True)
    op.kernel = api.NpuKernel(3, 3, 1, 1, dilation, dilation)
    op.padding = api.NpuPadding(top=pad, left=pad, bottom=pad, right=pad)
    op.block_traversal = traversal
    op.block_config = api.npu_find_block_configs(op, ACCELERATORS[accelerator])[0]
    cores = CORES[accelerator]
    flash, weight_ranges, bias_ranges = b"", [], []
    for core in range(cores):
        encoded = api.npu_encode_weights(
            ACCELERATORS[accelerator],
            weights[core::cores].astype(np.int16),
            (dilation, dilation),
            8,
            -(-op.block_config.depth // cores),
            False,
            traversal,
        )
        weight_ranges.append(api.NpuAddressRange(0, len(flash), len(encoded)))
        flash += encoded
        scales = b"".join(
            api.npu_encode_bias(np.int64(b), int(m), int(s))
            for b, m, s in zip(
                biases[core::cores], multipliers[core::cores], shifts[core::cores], strict=True
            )
        )
        scales += bytes(-len(scales) % 16)
        bias_ranges.append(api.NpuAddressRange(0, len(flash), len(scales)))
        flash += scales
    op.weights, op.biases = weight_ranges, bias_ranges
    words = api.npu_generate_register_command_stream([op], ACCELERATORS[accelerator])
    stream = np.array(words, "<u4").tobytes()

    name = "NHCWB16" if layout == api.NpuLayout.NHCWB16 else "NHWC"
    arena = RegionImage.empty(16384)
    write_tensor(arena, TensorPlacement(1, 0, (1, *ifm_shape), "int8", name), ifm)
    result = simulate(stream, {0: RegionImage.from_bytes(flash), 1: arena}, accelerator)
    assert result.findings == []
    got, complete = read_tensor(
        result.regions[1], TensorPlacement(1, 8192, (1, *ofm_shape), "int8", name)
    )
    assert complete

    reference_op = Conv2D(
        name="conv",
        kind="conv2d",
        ifm=NpuTensor("ifm", (1, *ifm_shape), Quant(1.0, 3)),
        ofm=NpuTensor("ofm", (1, *ofm_shape), Quant(1.0, -2)),
        kernel=kernel,
        padding=Padding(pad, pad, pad, pad),
        weights=weights,
        weight_zero_point=0,
        biases=biases,
        multipliers=multipliers,
        shifts=shifts,
        activation=Activation(),
    )
    np.testing.assert_array_equal(got, conv2d(reference_op, ifm))
