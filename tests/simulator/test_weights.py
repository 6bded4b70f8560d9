"""Weight and scale streams decode to what Vela's encoder was given.

The traversal order (`weight_order`) is checked against `mlw_codec.reorder_encode`, the
encoder Vela calls, over random kernels, depths, block depths, dilations, traversals, IFM
bit depths and micro-block sizes; scale records against Vela's `encode_bias`."""

from __future__ import annotations

import numpy as np
import pytest
from ethosu import mlw_codec
from ethosu.vela.weight_compressor import encode_bias

from cascader.simulator.descriptors import StreamRange
from cascader.simulator.memory import Memory, RegionImage, Reporter
from cascader.simulator.mlw_decode import decode_stream
from cascader.simulator.weight_order import WeightLayout, stream_order
from cascader.simulator.weights import read_scaling, read_weights


def _random_layout(rng: np.random.Generator) -> tuple[WeightLayout, np.ndarray]:
    depthwise = bool(rng.random() < 0.3)
    part_kernel = (not depthwise) and bool(rng.random() < 0.5)
    ifm_ublock, ofm_ublock = ((8, 8), (8, 4))[int(rng.integers(0, 2))]
    block = int(rng.choice([d for d in (4, 8, 16, 24, 32, 64) if d >= ofm_ublock]))
    layout = WeightLayout(
        ofm_depth=int(rng.integers(1, 40)),
        kernel_height=int(rng.integers(1, 10)),
        kernel_width=int(rng.integers(1, 10)),
        ifm_depth=1 if depthwise else int(rng.integers(1, 70)),
        ofm_block_depth=block,
        depthwise=depthwise,
        part_kernel_first=part_kernel,
        ifm_bits=int(rng.choice([8, 16])),
        dilation_y=int(rng.choice([1, 2])),
        dilation_x=int(rng.choice([1, 2])),
        ifm_ublock=ifm_ublock,
        ofm_ublock=ofm_ublock,
    )
    shape = (layout.ofm_depth, layout.kernel_height, layout.kernel_width, layout.ifm_depth)
    return layout, rng.integers(-255, 256, size=shape).astype(np.int16)


def _encode(layout: WeightLayout, weights: np.ndarray) -> bytes:
    encoded, _ = mlw_codec.reorder_encode(
        layout.ifm_ublock,
        layout.ofm_ublock,
        weights,
        layout.ofm_block_depth,
        layout.depthwise,
        layout.part_kernel_first,
        layout.ifm_bits,
        8 // layout.dilation_y,
        8 // layout.dilation_x,
    )
    return bytes(encoded)


@pytest.mark.parametrize("seed", range(4))
def test_traversal_order_matches_vela_encoder(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        layout, weights = _random_layout(rng)
        decoded = decode_stream(_encode(layout, weights))
        order = stream_order(layout)
        expected = np.where(order >= 0, weights.reshape(-1)[np.maximum(order, 0)], 0)
        assert decoded is not None
        np.testing.assert_array_equal(decoded, expected, err_msg=str(layout))


def _memory(content: bytes) -> Memory:
    return Memory({0: RegionImage.from_bytes(content)}, RegionImage.empty(1024))


def test_two_core_weights_interleave_channels() -> None:
    rng = np.random.default_rng(7)
    weights = rng.integers(-100, 100, size=(12, 3, 3, 5)).astype(np.int16)
    streams, content = [], b""
    for core in range(2):
        layout = WeightLayout(6, 3, 3, 5, 8, False, False, 8, 1, 1, 8, 8)
        encoded = _encode(layout, weights[core::2])
        streams.append(StreamRange(0, len(content), len(encoded)))
        content += encoded
    found = []
    reporter = Reporter(lambda kind, message: found.append(message))
    got = read_weights(
        _memory(content),
        tuple(streams),
        (12, 3, 3, 5),
        16,
        False,
        False,
        8,
        (1, 1),
        (8, 8),
        reporter,
    )
    assert not found
    np.testing.assert_array_equal(got, weights)


def test_scale_records_decode_as_vela_packs_them() -> None:
    values = [(-(1 << 39), 1, 0), ((1 << 39) - 1, (1 << 31) + 5, 63), (-5, 1234567, 17)]
    content = b"".join(encode_bias(np.int64(b), m, s) for b, m, s in values)
    reporter = Reporter(lambda kind, message: pytest.fail(message))
    scaling = read_scaling(_memory(content), (StreamRange(0, 0, len(content)),), 3, reporter)
    assert scaling is not None
    assert scaling.biases.tolist() == [b for b, _, _ in values]
    assert scaling.multipliers.tolist() == [m for _, m, _ in values]
    assert scaling.shifts.tolist() == [s for _, _, s in values]


def test_truncated_stream_is_reported_and_the_decoder_survives() -> None:
    layout = WeightLayout(16, 3, 3, 16, 16, False, False, 8, 1, 1, 8, 8)
    weights = np.random.default_rng(1).integers(-50, 50, (16, 3, 3, 16)).astype(np.int16)
    encoded = _encode(layout, weights)
    assert decode_stream(encoded[:-16]) is None
    assert decode_stream(encoded) is not None  # a new worker took over
