"""Concatenations as Vela schedules them: the op producing an input that only the
concatenation reads writes straight into its slice of the concatenated tensor (no copy, no
second live copy), block copies address NHCWB16 bricks, and the layer-by-layer schedule
buffers weights only where they fit beside every live feature map (a U-Net's skips). The
command streams of such schedules still compute the reference bit for bit on the simulator."""

from __future__ import annotations

import contextlib
import io
from functools import cache

import pytest
from sessions import session

from cascader.artifact.run import firmware_runner
from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.ir.npu_ops import Conv2D, Identity, Layout
from cascader.testing.architectures import build_cached, unet
from cascader.verify.point_check import verify_point

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
KIB = 1024


@cache
def _small_unet() -> bytes:
    return unet(size=32).build()


def _copies(model: bytes) -> list[Identity]:
    ops = session(model, *U55).prepared.network.functions[0].ops
    return [op for op in ops if isinstance(op, Identity) and op.ofm_offset]


def test_up_path_writes_into_the_concatenation_and_the_skip_is_copied() -> None:
    """Each decoder step: the transpose convolution's output (read by the concatenation
    alone) is written in place, the skip (read by the next pooling too) is copied in late;
    the bricks of both slices start at whole multiples of 16 channels, so all stay NHCWB16."""
    model = _small_unet()
    copies = _copies(model)
    assert [op.operator for op in copies] == ["IN_PLACE", "COPY"] * 4
    net = session(model, *U55).prepared.network
    producers = {op.ofm.name: op for op in net.functions[0].ops}
    for op in copies:
        assert op.ofm.layout == op.ifm.layout == Layout.NHCWB16
        if op.operator == "IN_PLACE":
            producer = producers[op.ifm.name]
            assert isinstance(producer, Conv2D) and producer.upscale == "ZEROS"
            assert producer.ofm.layout == Layout.NHCWB16


def test_in_place_inputs_take_no_buffer_and_cost_nothing() -> None:
    model = _small_unet()
    found = session(model, *U55)
    point = found.schedule(PointConfig(4 << 20, None))
    net = point.schedule.network
    placed = set(net.offsets)
    assert len(placed) == 4
    assert not placed & set(point.schedule.tensor_buffer)  # held by the concatenation's
    stripes = {net.ops[s.part].name for s in point.schedule.steps if hasattr(s, "ofm_buffer")}
    in_place = {op.name for op in _copies(model) if op.operator == "IN_PLACE"}
    assert not stripes & in_place


@pytest.mark.parametrize(
    ("system", "pool", "options"),
    [
        (U55, 4 << 20, None),
        (U55, 1 << 20, CascaderOptions(enable_striping=True)),
        (U65, 64 * KIB, CascaderOptions(enable_striping=True)),
        (U65, 16 * KIB, None),
    ],
    ids=["u55-off", "u55-striped", "u65-striped", "u65-off"],
)
def test_in_place_schedules_run_bit_for_bit(system, pool: int, options) -> None:
    found = session(_small_unet(), *system)
    config = PointConfig(pool, options)
    with contextlib.redirect_stdout(io.StringIO()):
        result = verify_point(found, config, compiled=firmware_runner(found, config))
    assert result.findings == ()
    assert result.max_abs_diff()["command_stream_vs_reference"] == 0
    assert result.max_abs_diff()["schedule_vs_reference"] == 0


def test_unet_fits_beside_its_skips_at_vela_size_footprint() -> None:
    """The 128x128 U-Net without the cascader: at its last decoder step the concatenation
    (512 KiB), the first skip (256 KiB) and the transpose convolution's input (128 KiB) are
    live, Vela 5.2's `--optimise Size` footprint of 896 KiB; weight copies that do not fit
    beside the live skips stay in flash, so the schedule needs no more."""
    found = session(build_cached("unet"), *U55)
    estimate = found.score(PointConfig(896 * KIB, None))
    assert estimate.fits
    assert estimate.sram_used_bytes == 896 * KIB
