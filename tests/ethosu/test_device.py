"""Block configs from Vela for every accelerator and op kind, checked against TVM v0.18's."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from ethosu.vela.api import npu_find_block_configs

from cascader.ethosu.device import (
    ACCELERATORS,
    _try_block_config,
    _vela_block_config,
    get_device,
    valid_blocks,
)
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.vela_arch import npu_accelerator

SHARED = Path(
    os.environ.get("CASCADER_SHARED", Path(__file__).resolve().parents[2].parent / "shared")
)

OPS = {
    "conv2d": NpuOpDescription("conv2d", (56, 56, 24), (56, 56, 144), activation="CLIP"),
    "conv2d_strided": NpuOpDescription(
        "conv2d", (49, 10, 1), (25, 5, 64), kernel=(10, 4), stride=(2, 2)
    ),
    "depthwise": NpuOpDescription("depthwise", (56, 56, 144), (56, 56, 144), kernel=(3, 3)),
    "max_pool": NpuOpDescription(
        "pooling", (8, 8, 64), (4, 4, 64), kernel=(2, 2), stride=(2, 2), sub_op="MAX"
    ),
    "avg_pool": NpuOpDescription(
        "pooling", (7, 7, 1280), (1, 1, 1280), kernel=(7, 7), sub_op="AVERAGE"
    ),
    "add": NpuOpDescription(
        "elementwise", (56, 56, 24), (56, 56, 24), ifm2_shape=(56, 56, 24), sub_op="ADD"
    ),
    "mul_scalar_lut": NpuOpDescription(
        "elementwise",
        (1, 1, 1000),
        (1, 1, 1000),
        sub_op="MUL",
        ifm2_shape=(1, 1, 1),
        ifm2_scalar=True,
        activation="LUT",
    ),
    "int16_conv": NpuOpDescription(
        "conv2d", (16, 16, 32), (16, 16, 32), kernel=(3, 3), ifm_dtype="int16", ofm_dtype="int16"
    ),
}


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_kind_has_block_configs_on_every_accelerator(accelerator, name):
    device = get_device(accelerator)
    op = OPS[name]
    configs = device.block_configs(op)
    assert configs
    max_h, max_w, _ = device.max_block
    _, _, ud = device.output_ublock
    for config in configs:
        _, h, w, d = config.output_shape
        # Vela steps block height and width by at least 2, so they may pass a 1-high OFM.
        assert h <= min(max_h, max(op.ofm_shape[0] + 1, 2))
        assert w <= min(max_w, max(op.ofm_shape[1] + 1, 2))
        assert d % ud == 0 or d >= op.ofm_shape[2]
        assert config.output_cycles > 0
        assert (config.compute_cycles > 0) == (op.kind != "elementwise")
    assert set(configs) <= set(device.block_configs(op, cull=False))


def test_device_constants_come_from_vela():
    assert [get_device(a).macs_per_cycle for a in ACCELERATORS] == [32, 64, 128, 256, 256, 512]
    u55_256 = get_device("ethos-u55-256")
    assert u55_256.output_quantum() == (1, 2, 2, 8)
    assert u55_256.output_quantum("NHCWB16") == (1, 2, 1, 2, 8)
    assert get_device("ethos-u55-32").output_ublock == (1, 1, 4)
    assert get_device("ethos-u65-512").cores == 2


def test_bigger_accelerators_need_fewer_cycles_per_block_element():
    op = OPS["conv2d"]
    per_element = []
    for name in ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256"):
        best = get_device(name).block_configs(op)[0]
        _, h, w, d = best.output_shape
        per_element.append(best.compute_cycles / (h * w * d))
    assert per_element == sorted(per_element, reverse=True)


def test_unknown_accelerator_lists_the_valid_names():
    with pytest.raises(DeviceConfigError) as err:
        get_device("ethos-u55-512")
    assert "ethos-u55-512" in str(err.value)
    for name in ACCELERATORS:
        assert name in str(err.value)


def test_culling_keeps_only_blocks_no_other_block_covers():
    device = get_device("ethos-u55-256")
    culled = device.block_configs(OPS["conv2d"])
    shapes = [c.output_shape for c in culled]
    for a in shapes:
        assert not any(b != a and all(x >= y for x, y in zip(b, a, strict=False)) for b in shapes)
    assert len(device.block_configs(OPS["conv2d"], cull=False)) > len(culled)


# mobilenet_v2 conv2d parts TVM v0.18 computed block configs for, and the op each part is.
_GOLDEN_CONV2D = {
    102: NpuOpDescription(
        "conv2d",
        (224, 224, 3),
        (112, 112, 32),
        kernel=(3, 3),
        stride=(2, 2),
        ofm_layout="NHCWB16",
        activation="CLIP",
    ),
    100: NpuOpDescription(
        "conv2d", (112, 112, 32), (112, 112, 16), ifm_layout="NHCWB16", ofm_layout="NHCWB16"
    ),
    99: NpuOpDescription(
        "conv2d",
        (112, 112, 16),
        (112, 112, 96),
        ifm_layout="NHCWB16",
        ofm_layout="NHCWB16",
        activation="CLIP",
    ),
}


@pytest.mark.skipif(not (SHARED / "golden").is_dir(), reason="shared/golden not available")
@pytest.mark.parametrize("part_id", sorted(_GOLDEN_CONV2D))
def test_conv2d_block_configs_reproduce_tvm_v018(part_id):
    graph = json.loads((SHARED / "golden" / "mobilenet_v2_100_224_s1_p1024k.json").read_text())
    part = next(p for p in graph["parts"] if p["id"] == part_id)
    tensors = {t["id"]: t for t in graph["tensors"]}
    op = _GOLDEN_CONV2D[part_id]
    assert tensors[part["output"]]["shape"][1] == op.ofm_shape[0]
    mine = [c.to_json() for c in get_device("ethos-u55-256").block_configs(op)]
    assert mine == part["block_configs"]


def _config_facts(config) -> tuple:
    layout = config.layout
    return (str(config), vars(layout), config.acc_type, config.is_partkernel, config.bank_size)


def _stripes(op: NpuOpDescription) -> list[NpuOpDescription]:
    """The op whole, depth slices (half, all but 16 channels) and stripes of one row, two
    rows, a third and all but one row of it (tall or deep ones cap to the whole op's bounds
    on the largest block)."""
    h, w, c = op.ofm_shape
    stripes = [op, *(_depth_slice(op, max(8, d)) for d in sorted({c // 2, c - 16}))]
    for rows in sorted({1, 2, max(1, h // 3), max(1, h - 1)}):
        ifm_rows = min(op.ifm_shape[0], rows * op.stride[0] + op.kernel[0] - 1)
        stripe = replace(op, ofm_shape=(rows, w, c), ifm_shape=(ifm_rows, *op.ifm_shape[1:]))
        if op.ifm2_shape is not None and not op.ifm2_scalar:
            stripe = replace(stripe, ifm2_shape=(rows, *op.ifm2_shape[1:]))
        stripes.append(stripe)
    return stripes


def _depth_slice(op: NpuOpDescription, depth: int) -> NpuOpDescription:
    """The op's first `depth` output channels: a convolution reads every input channel for
    them, other ops only their own."""
    stripe = replace(op, ofm_shape=(*op.ofm_shape[:2], depth))
    if op.kind == "conv2d":
        return stripe
    stripe = replace(stripe, ifm_shape=(*op.ifm_shape[:2], depth))
    if op.ifm2_shape is not None and not op.ifm2_scalar:
        stripe = replace(stripe, ifm2_shape=(*op.ifm2_shape[:2], depth))
    return stripe


@pytest.mark.parametrize("accelerator", ["ethos-u55-256", "ethos-u65-256"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_stripes_of_an_op_share_vela_block_configs_that_vela_gives_each(accelerator, name):
    """A block's Vela config is remembered per op facts, not per stripe shape: each stripe
    (one row, a few rows, the whole op, a depth slice) gets what Vela's own
    try_block_config returns for exactly its shapes."""
    op = OPS[name]
    for stripe in _stripes(op):
        for block in valid_blocks(accelerator, op):
            fresh = _try_block_config(accelerator, stripe, block)
            if fresh is None:
                with pytest.raises(ValueError):
                    _vela_block_config(accelerator, stripe, block)
                continue
            shared = _vela_block_config(accelerator, stripe, block)
            assert _config_facts(shared) == _config_facts(fresh)


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", sorted(OPS))
def test_stripes_of_an_op_share_the_valid_blocks_vela_finds_for_each(accelerator, name):
    """Valid blocks are walked over Vela's grid, whether each fits remembered per op facts:
    every stripe of the op (asked after the others, so most blocks hit the memo) gets
    exactly the list Vela's npu_find_block_configs returns for its own shapes, in order."""
    for stripe in _stripes(OPS[name]):
        fresh = npu_find_block_configs(stripe.to_npu_op(), npu_accelerator(accelerator))
        assert valid_blocks(accelerator, stripe) == tuple(
            (b.height, b.width, b.depth) for b in fresh
        )


@pytest.mark.parametrize("accelerator", ["ethos-u55-32", "ethos-u65-256"])
def test_convolutions_that_differ_only_in_input_depth_get_their_own_valid_blocks(accelerator):
    """The memo's key holds the input depth: it decides which blocks' input fits SHRAM.
    (ethos-u55-32's one-by-one micro-block: Vela's grid still starts at two by two.)"""
    for depth in (8, 16, 64):
        op = NpuOpDescription("conv2d", (56, 56, depth), (56, 56, 144), kernel=(3, 3))
        fresh = npu_find_block_configs(op.to_npu_op(), npu_accelerator(accelerator))
        assert valid_blocks(accelerator, op) == tuple((b.height, b.width, b.depth) for b in fresh)
