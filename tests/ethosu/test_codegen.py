"""Schedule -> Vela API operations -> command stream: what the NPU is told matches the schedule,
Vela's command-stream generator accepts it, and equal inputs give equal bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ethosu.vela.api import (
    NpuBlockOperation,
    NpuConv2DOperation,
    NpuDmaOperation,
    NpuElementWiseOperation,
)
from ethosu.vela.register_command_stream_util import BASE_PTR_INDEX_MEM2MEM

from cascader.core.options import CascaderOptions
from cascader.ethosu.codegen import encoded_weights, generate
from cascader.ethosu.memory import system_memory
from cascader.ethosu.perf import evaluate
from cascader.flow.frontend import load_tflite
from cascader.flow.pipeline import compile_model, front_half, schedule_point
from cascader.flow.schedule import Stripe
from cascader.testing.networks import CATALOGUE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")


@pytest.fixture(scope="module")
def cascaded():
    front = front_half(load_tflite(EXAMPLE), U55[0])
    memory = system_memory(*U55, 256 * 1024)
    point = schedule_point(front, memory, CascaderOptions(enable_striping=True))
    return point, generate(point.schedule, U55[0])


def test_every_stripe_becomes_one_block_operation_with_its_block_config(cascaded) -> None:
    point, compiled = cascaded
    stripes = [s for s in point.schedule.steps if isinstance(s, Stripe)]
    ops = [o for f in compiled.functions for o in f.operations if isinstance(o, NpuBlockOperation)]
    assert len(ops) == len(stripes)
    for stripe, op in zip(stripes, ops, strict=True):
        assert tuple(op.block_config) == stripe.block
        _, h, w, c = stripe.ofm.shape
        assert tuple(op.ofm.shape) == (h, w, c)
    assert sum(len(o.stripes) for o in compiled.scheduled_ops) == len(stripes)


def test_weights_are_encoded_per_stripe_depth_slice(cascaded) -> None:
    point, compiled = cascaded
    net = point.schedule.network
    ops = [o for f in compiled.functions for o in f.operations if isinstance(o, NpuBlockOperation)]
    stripes = [s for s in point.schedule.steps if isinstance(s, Stripe)]
    checked = 0
    for stripe, op in zip(stripes, ops, strict=True):
        if stripe.channels is None:
            continue
        lo, hi = stripe.channels
        payload = encoded_weights(U55[0], net.ops[stripe.part], lo, hi, stripe.block[2])
        assert op.weights[0].length == -(-len(payload) // 16) * 16
        assert op.biases[0].length == -(-10 * (hi - lo) // 16) * 16
        if stripe.weights_buffer >= 0:  # read from the copy in SRAM, not from flash
            assert op.weights[0].region == point.schedule.buffers[stripe.weights_buffer].region
        checked += 1
    assert checked > 30


def test_rolling_buffers_wrap_through_a_second_tile(cascaded) -> None:
    point, compiled = cascaded
    rolling = {b.region for b in point.schedule.buffers if b.kind == "rolling"}
    assert rolling
    wrapped = [
        fm
        for op in compiled.scheduled_ops
        for stripe in op.stripes
        for fm in (stripe.ifm, stripe.ofm)
        if fm.tiles.addresses[2]
    ]
    assert wrapped
    for fm in wrapped:
        assert fm.tiles.height_0 < fm.shape.height
        assert fm.tiles.addresses[2] < fm.tiles.addresses[0]


def test_weight_copies_are_dmas_from_the_constants(cascaded) -> None:
    _, compiled = cascaded
    dmas = [o for f in compiled.functions for o in f.operations if isinstance(o, NpuDmaOperation)]
    weight_dmas = [d for d in dmas if d.dest.region != BASE_PTR_INDEX_MEM2MEM]
    assert weight_dmas
    for dma in weight_dmas:
        assert dma.src.region == 0 and dma.dest.region == 1
        assert dma.src.address + dma.src.length <= len(compiled.constants)
        assert dma.src.length % 16 == 0 and dma.dest.address % 16 == 0


def test_command_stream_and_payload(cascaded) -> None:
    _, compiled = cascaded
    (stream,) = compiled.functions
    words = np.frombuffer(stream.command_stream, dtype="<u4")
    assert len(words) > len(stream.operations)
    assert stream.driver_payload[:4] == b"COP1"
    assert len(stream.driver_payload) > len(stream.command_stream)


def test_evaluator_scores_the_compiled_stripes(cascaded) -> None:
    point, compiled = cascaded
    report = evaluate(compiled.scheduled_ops, point.memory)
    parts = [p for p in point.schedule.network.graph.parts if not p.in_line]
    assert len(report.ops) == len(parts)
    assert report.total_cycles == pytest.approx(sum(o.total_cycles for o in report.ops))
    assert report.macs > 15_000_000  # the example's convolutions


def test_scalar_constants_too_wide_for_the_register_live_in_the_constants() -> None:
    front = front_half(CATALOGUE["SOFTMAX-vector-beta"]().build(), U55[0])
    memory = system_memory(*U55, 256 * 1024)
    compiled = generate(schedule_point(front, memory, None).schedule, U55[0])
    elementwise = [
        o for f in compiled.functions for o in f.operations
        if isinstance(o, NpuElementWiseOperation) and o.ifm2 is not None
    ]  # fmt: skip
    in_constants = [o for o in elementwise if o.ifm2_scalar is None and o.ifm2.region == 0]
    in_register = [o for o in elementwise if o.ifm2_scalar is not None]
    assert in_constants and in_register


def test_compile_is_byte_identical_across_processes(tmp_path: Path) -> None:
    here = tmp_path / "here"
    compile_model(EXAMPLE, here, *U55, 256 * 1024, CascaderOptions(enable_striping=True))
    there = tmp_path / "there"
    subprocess.run(
        [sys.executable, "-m", "dse", "compile", "--model", str(EXAMPLE), "--sram", "256KiB",
         "-o", str(there)],
        check=True, capture_output=True,
    )  # fmt: skip
    for name in ("npu0.cs", "npu0.payload", "constants.bin", "manifest.json"):
        assert (here / name).read_bytes() == (there / name).read_bytes(), name


def test_conv_traversal_matches_the_weight_encoding(cascaded) -> None:
    _, compiled = cascaded
    convs = [
        o for f in compiled.functions for o in f.operations if isinstance(o, NpuConv2DOperation)
    ]
    assert {o.block_traversal.name for o in convs} <= {"DEPTH_FIRST", "PART_KERNEL_FIRST"}
    first = convs[0]  # 3 input channels: Vela always traverses part-kernel first
    assert first.ifm.shape.depth == 3 and first.block_traversal.name == "PART_KERNEL_FIRST"
