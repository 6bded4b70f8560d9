"""Concatenations: one along the channels is one op copying each input into its slice
(`Concatenation`, which cascades); where a schedule holds both an input and the
concatenation whole, the input only it reads is written straight into its slice by its
producer (no copy, no second live copy), as Vela's scheduler has it; one along another axis
stays a block copy per input, written in place the same way. Block copies address NHCWB16
bricks, and the layer-by-layer schedule buffers weights only where they fit beside every
live feature map (a U-Net's skips). The command streams of such schedules compute the
reference bit for bit on the simulator."""

from __future__ import annotations

import contextlib
import io
from functools import cache

import pytest
from sessions import session

from cascader.artifact.run import firmware_runner
from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.ethosu.codegen import generate
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


def test_each_decoder_concatenation_is_one_op_of_both_inputs() -> None:
    """Each decoder step: the transpose convolution's output and the skip are both inputs of
    one concatenation, which can copy each into its slice stripe by stripe (so it can
    cascade; the network writes nothing in place, its schedules choose); the bricks of both
    slices start at whole multiples of 16 channels, so all stay NHCWB16."""
    model = _small_unet()
    concatenations = _concatenations(model)
    assert len(concatenations) == 4
    net = session(model, *U55).prepared.network
    assert not net.offsets
    producers = {op.ofm.name: op for op in net.functions[0].ops}
    for op in concatenations:
        assert [copy.operator for copy in op.copies] == ["COPY", "COPY"]
        assert op.in_place == ()
        assert op.ofm.layout == Layout.NHCWB16
        assert all(ifm.layout == Layout.NHCWB16 for ifm in op.ifms)
        up = producers[op.ifms[0].name]
        assert isinstance(up, Conv2D) and up.upscale == "ZEROS"


def test_layer_by_layer_writes_the_up_path_into_the_concatenation() -> None:
    """Without the cascader every tensor is whole: each transpose convolution's output (read
    by the concatenation alone) is written in place and takes no buffer, and the
    concatenation copies only the skip (read by the next pooling too)."""
    found = session(_small_unet(), *U55)
    point = found.schedule(PointConfig(4 << 20, None))
    net = point.schedule.network
    concatenations = [(pid, op) for pid, op in enumerate(net.ops) if isinstance(op, Concatenation)]
    assert [op.in_place for _, op in concatenations] == [(0,)] * 4
    placed = set(net.offsets)
    assert len(placed) == 4 and not placed & set(point.schedule.tensor_buffer)
    for pid, _ in concatenations:
        (tensor, *_) = net.graph.parts[pid].inputs
        assert net.buffer_root(tensor.id) == net.graph.parts[pid].output.id
        assert net.offsets[tensor.id] == (0, 0, 0, 0)  # the first slice
    compiled = generate(point.schedule, U55[0], command_streams=False)
    copies = {op.name: len(op.stripes) for op in compiled.scheduled_ops}
    assert [copies[op.name] for _, op in concatenations] == [1] * 4  # the skip's copy alone


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


def test_unet_fits_beside_its_skips_at_vela_size_footprint() -> None:
    """The 128x128 U-Net without the cascader: at its last decoder step the concatenation
    (512 KiB, the transpose convolution's output written into it), the first skip (256 KiB)
    and the transpose convolution's input (128 KiB) are live, Vela 5.2's `--optimise Size`
    footprint of 896 KiB; weight copies that do not fit beside the live skips stay in
    flash, so the schedule needs no more."""
    found = session(build_cached("unet"), *U55)
    estimate = found.score(PointConfig(896 * KIB, None))
    assert estimate.fits
    assert estimate.sram_used_bytes == 896 * KIB
