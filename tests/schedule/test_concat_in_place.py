"""Concatenations: one along the channels is one op copying each input into its slice
(`Concatenation`, which cascades); one along another axis stays a block copy per input,
the input only it reads written straight into its slice (no copy, no second live copy), as
Vela's scheduler has it. Block copies address NHCWB16 bricks, and the layer-by-layer
schedule buffers weights only where they fit beside every live feature map (a U-Net's
skips). The command streams of such schedules compute the reference bit for bit on the
simulator."""

from __future__ import annotations

import contextlib
import io
from functools import cache

import pytest
from sessions import session

from cascader.artifact.run import firmware_runner
from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.ir.npu_ops import Concatenation, Conv2D, Identity, Layout
from cascader.testing.architectures import build_cached, unet
from cascader.testing.tflite_builder import ModelBuilder
from cascader.verify.point_check import verify_point

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
KIB = 1024


@cache
def _small_unet() -> bytes:
    return unet(size=32).build()


def _concatenations(model: bytes) -> list[Concatenation]:
    ops = session(model, *U55).prepared.network.functions[0].ops
    return [op for op in ops if isinstance(op, Concatenation)]


def test_each_decoder_concatenation_is_one_op_copying_both_inputs() -> None:
    """Each decoder step: the transpose convolution's output and the skip are both inputs of
    one concatenation, which copies each into its slice stripe by stripe (so it can cascade;
    nothing is written in place); the bricks of both slices start at whole multiples of 16
    channels, so all stay NHCWB16."""
    model = _small_unet()
    concatenations = _concatenations(model)
    assert len(concatenations) == 4
    net = session(model, *U55).prepared.network
    assert not net.offsets
    producers = {op.ofm.name: op for op in net.functions[0].ops}
    for op in concatenations:
        assert [copy.operator for copy in op.copies] == ["COPY", "COPY"]
        assert op.ofm.layout == Layout.NHCWB16
        assert all(ifm.layout == Layout.NHCWB16 for ifm in op.ifms)
        up = producers[op.ifms[0].name]
        assert isinstance(up, Conv2D) and up.upscale == "ZEROS"


def test_a_height_concatenation_is_written_in_place() -> None:
    """A concatenation along another axis than the channels stays one block copy per input:
    the input only it reads is written straight into its slice, taking no buffer."""
    b = ModelBuilder(0, 2, name="rows")
    x = b.input((1, 8, 8, 16))
    top = b.conv2d(x, 16, kernel=3, activation="RELU")
    bottom = b.conv2d(x, 16, kernel=1, activation="RELU")
    b.output(b.conv2d(b.concatenation([top, bottom], axis=1), 16, kernel=3, activation="RELU"))
    found = session(b.build(), *U55)
    net = found.prepared.network
    copies = [op for op in net.functions[0].ops if isinstance(op, Identity) and op.ofm_offset]
    assert [op.operator for op in copies] == ["IN_PLACE", "IN_PLACE"]
    point = found.schedule(PointConfig(4 << 20, None))
    placed = set(point.schedule.network.offsets)
    assert len(placed) == 2 and not placed & set(point.schedule.tensor_buffer)


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


def test_unet_without_the_cascader_holds_each_concatenation_beside_its_inputs() -> None:
    """The 128x128 U-Net without the cascader: at its last decoder step the concatenation
    (512 KiB), the first skip and the transpose convolution's output (256 KiB each) are
    live, as its inputs are copied in; weight copies that do not fit beside the live
    feature maps stay in flash, so the schedule needs no more. The cascader's schedules
    stripe the concatenation instead (`test_concat_in_cascades`)."""
    found = session(build_cached("unet"), *U55)
    estimate = found.score(PointConfig(1024 * KIB, None))
    assert estimate.fits
    assert estimate.sram_used_bytes == 1024 * KIB
