"""Schedule -> Vela API operations -> command stream: what the NPU is told matches the schedule,
Vela's command-stream generator accepts it, and equal inputs give equal bytes."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ethosu.vela import compiler_driver, model_reader, scheduler
from ethosu.vela.api import (
    NpuBlockOperation,
    NpuConv2DOperation,
    NpuDmaOperation,
    NpuElementWiseOperation,
)
from ethosu.vela.high_level_command_stream import NpuStripe
from ethosu.vela.register_command_stream_util import BASE_PTR_INDEX_MEM2MEM
from ethosu.vela.weight_compressor import WeightKey
from sessions import compile_model, prepared_model

from cascader.core.options import CascaderOptions
from cascader.ethosu.codegen import generate
from cascader.ethosu.memory import system_memory
from cascader.ethosu.perf import evaluate
from cascader.ethosu.vela_arch import system_arch
from cascader.ethosu.vela_baseline import fresh_vela_state
from cascader.ethosu.weights import core_bias_streams, core_weight_streams, encoded_weights
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.npu_ops import Conv2D
from cascader.ir.schedule import Stripe
from cascader.testing.networks import CATALOGUE, single_op_model

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("Ethos_U65_High_End", "Dedicated_Sram")


@pytest.fixture(scope="module")
def cascaded():
    prepared = prepared_model(load_tflite(EXAMPLE), U55[0])
    memory = system_memory(*U55, 256 * 1024)
    point = prepared.scheduler.schedule_point(memory, CascaderOptions(enable_striping=True))
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
    prepared = prepared_model(CATALOGUE["SOFTMAX-vector-beta"]().build(), U55[0])
    memory = system_memory(*U55, 256 * 1024)
    compiled = generate(prepared.scheduler.schedule_point(memory, None).schedule, U55[0])
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
         "--cost-model", "tvm", "-o", str(there)],
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


def _vela_core_streams(model: Path, accelerator: str) -> list[tuple[int, int, int, list, list]]:
    """Per weight stripe of Vela's own legacy-core compile: its output channels [lo, hi), OFM
    block depth, and each core's encoded weights and scale-bias as Vela laid them out."""
    arch = system_arch(accelerator, *U65, 256 * 1024)
    options = scheduler.SchedulerOptions(
        scheduler.OptimizationStrategy.Performance, arch.arena_cache_size, False
    )
    fresh_vela_state()
    with contextlib.redirect_stdout(io.StringIO()):
        nng, kind = model_reader.read_model(str(model), model_reader.ModelReaderOptions())
        compiler_driver.compiler_driver(
            nng, arch, compiler_driver.CompilerOptions(), options, kind, ""
        )
    found = []
    for sg in nng.subgraphs:
        for cmd in sg.high_level_command_stream:
            if not isinstance(cmd, NpuStripe) or cmd.weight_tensor is None:
                continue
            source = cmd.weight_tensor.src_tensor or cmd.weight_tensor
            lo, hi = cmd.weight_box.start_coord[-1], cmd.weight_box.end_coord[-1]
            weights, biases = [], []
            for core in range(arch.ncores):
                r = source.encoded_ranges[WeightKey(core, lo)]
                start = r.offset + r.weight_offset
                weights.append(bytes(source.buffer[start : start + r.weight_bytes]))
                biases.append(bytes(source.buffer[r.offset : r.offset + r.scale_bytes]))
            found.append((lo, hi, cmd.block_config[3], weights, biases))
    return found


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("CONV_2D", {"shape": (1, 16, 16, 24), "filters": 40}),
        ("CONV_2D", {"shape": (1, 32, 32, 3), "filters": 37}),  # part-kernel first, odd depth
        ("DEPTHWISE_CONV_2D", {"shape": (1, 16, 16, 40)}),
    ],
)
def test_per_core_encoding_matches_velas_own_ethos_u65_512_compile(
    tmp_path: Path, kind: str, params: dict
) -> None:
    model = tmp_path / "op.tflite"
    model.write_bytes(single_op_model(kind, **params))
    (op,) = [o for o in prepared_model(load_tflite(model), "ethos-u65-512").network.ops
             if isinstance(o, Conv2D)]  # fmt: skip
    stripes = _vela_core_streams(model, "ethos-u65-512")
    assert stripes
    for lo, hi, depth, weights, biases in stripes:
        assert core_weight_streams("ethos-u65-512", op, lo, hi, depth) == weights
        assert core_bias_streams("ethos-u65-512", op, lo, hi, depth) == biases


def _u65_compiled(model, accelerator: str):
    prepared = prepared_model(model, accelerator)
    memory = system_memory(accelerator, *U65, 256 * 1024)
    point = prepared.scheduler.schedule_point(memory, CascaderOptions(enable_striping=True))
    return point, generate(point.schedule, accelerator)


def test_ethos_u65_512_reads_one_weight_and_bias_range_per_core(tmp_path: Path) -> None:
    model = tmp_path / "conv.tflite"
    model.write_bytes(single_op_model("CONV_2D", shape=(1, 32, 32, 16), filters=48))
    point, compiled = _u65_compiled(load_tflite(model), "ethos-u65-512")
    convs = [o for f in compiled.functions for o in f.operations
             if isinstance(o, NpuConv2DOperation)]  # fmt: skip
    assert convs
    for conv in convs:
        assert len(conv.weights) == len(conv.biases) == 2
        for ranges in (conv.weights, conv.biases):
            first, second = ranges
            assert first.address % 16 == 0 and first.length % 16 == 0
            assert second.address == first.address + first.length  # laid out end to end
    copies = [o for f in compiled.functions for o in f.operations
              if isinstance(o, NpuDmaOperation)]  # fmt: skip
    by_dest = {(d.dest.region, d.dest.address): d.src.length for d in copies}
    for conv in convs:
        for ranges in (conv.weights, conv.biases):
            copied = by_dest.get((ranges[0].region, ranges[0].address))
            if copied is not None:  # a copy into SRAM holds both cores' streams
                assert copied >= sum(r.length for r in ranges)
    again = generate(point.schedule, "ethos-u65-512")
    assert [f.command_stream for f in again.functions] == [
        f.command_stream for f in compiled.functions
    ]
    assert again.constants == compiled.constants
    dual = evaluate(compiled.scheduled_ops, point.memory).total_cycles
    single_point, single = _u65_compiled(load_tflite(model), "ethos-u65-256")
    assert dual < evaluate(single.scheduled_ops, single_point.memory).total_cycles


def test_example_compiles_for_ethos_u65_512_byte_identically_and_faster() -> None:
    point, compiled = _u65_compiled(load_tflite(EXAMPLE), "ethos-u65-512")
    again = generate(point.schedule, "ethos-u65-512")
    assert all(f.command_stream for f in compiled.functions)
    assert [f.command_stream for f in again.functions] == [
        f.command_stream for f in compiled.functions
    ]
    dual = evaluate(compiled.scheduled_ops, point.memory).total_cycles
    single_point, single = _u65_compiled(load_tflite(EXAMPLE), "ethos-u65-256")
    assert dual < evaluate(single.scheduled_ops, single_point.memory).total_cycles
