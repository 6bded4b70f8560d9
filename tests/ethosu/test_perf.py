"""The performance evaluator on hand-built NPU operations (Vela API types, real encoded weights)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from ethosu.vela.api import (
    NpuAccelerator,
    NpuAddressRange,
    NpuBlockTraversal,
    NpuDataType,
    NpuDmaOperation,
    NpuLayout,
    NpuShape3D,
    npu_encode_bias,
    npu_encode_weights,
)
from ethosu.vela.npu_performance import measure_mem2mem_cycles
from ethosu.vela.tensor import MemArea
from sessions import prepared_model

from cascader.core.options import CascaderOptions
from cascader.ethosu.codegen import generate
from cascader.ethosu.device import get_device
from cascader.ethosu.memory import system_memory
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.perf import ScheduledOp, evaluate
from cascader.ethosu.weights import encoded_size
from cascader.ir.schedule import REGION_CONSTANTS, Copy
from cascader.schedule.policies import layer_by_layer_schedule
from cascader.testing.tflite_builder import ModelBuilder

ACCEL = "ethos-u55-256"
U55 = ("Ethos_U55_High_End_Embedded", "Shared_Sram")


def _weight_ranges(desc: NpuOpDescription, depth_slices: int = 1):
    """Encoded weight and bias ranges of `desc` (random int8 weights), per OFM depth slice."""
    rng = np.random.default_rng(0)
    kh, kw = desc.kernel
    depthwise = desc.kind == "depthwise"
    ifm_depth = 1 if depthwise else desc.ifm_shape[2]
    ofm_depth = desc.ofm_shape[2]
    weights = rng.integers(-127, 128, size=(ofm_depth, kh, kw, ifm_depth)).astype(np.int16)
    traversal = (
        NpuBlockTraversal.PART_KERNEL_FIRST if desc.is_part_kernel_first
        else NpuBlockTraversal.DEPTH_FIRST
    )  # fmt: skip
    slices, address = [], 0
    for chunk in np.array_split(weights, depth_slices, axis=0):
        encoded = npu_encode_weights(
            NpuAccelerator.Ethos_U55_256, chunk, (1, 1), 8, 16, depthwise, traversal
        )
        bias = b"".join(npu_encode_bias(np.int64(1), 1 << 30, 30) for _ in range(len(chunk)))
        w = NpuAddressRange(region=0, address=address, length=len(encoded))
        b = NpuAddressRange(region=0, address=address + len(encoded), length=len(bias))
        address += len(encoded) + len(bias)
        slices.append(([w], [b]))
    return slices


def _stripe(desc: NpuOpDescription, ranges=None):
    """A Vela API op for `desc`, with its first (largest) valid block config."""
    op = desc.to_npu_op()
    block = get_device(ACCEL).block_configs(desc)[0].output_shape
    h, w = block[1], block[-2] if desc.ofm_layout == "NHCWB16" else block[2]
    d = min(desc.ofm_shape[2], block[2] * block[4]) if desc.ofm_layout == "NHCWB16" else block[3]
    op.block_config = NpuShape3D(h, w, d)
    if ranges is not None:
        op.weights, op.biases = ranges
    return op


CONV = NpuOpDescription("conv2d", (56, 56, 24), (56, 56, 144), activation="CLIP")
DEPTHWISE = NpuOpDescription("depthwise", (56, 56, 144), (56, 56, 144), kernel=(3, 3),
                             activation="CLIP")  # fmt: skip
ADD = NpuOpDescription("elementwise", (56, 56, 24), (56, 56, 24), ifm2_shape=(56, 56, 24),
                       sub_op="ADD")  # fmt: skip


def _schedule(const_area="offchip_flash", source=None, buffering="single"):
    ops = []
    for name, desc in (("conv", CONV), ("dw", DEPTHWISE)):
        ranges = _weight_ranges(desc)[0]
        copies = (ranges[0][0].length + ranges[1][0].length,) if source else ()
        ops.append(ScheduledOp(name, (_stripe(desc, ranges),), const_area=const_area,
                               weight_source_area=source, weight_buffering=buffering,
                               weight_copies=copies))  # fmt: skip
    ops.append(ScheduledOp("add", (_stripe(ADD),)))
    return ops


def test_totals_are_the_sum_of_the_per_op_rows():
    report = evaluate(_schedule(), system_memory(ACCEL, *U55, 1 << 20))
    assert [op.kind for op in report.ops] == ["conv2d", "depthwise", "elementwise"]
    assert report.total_cycles == pytest.approx(sum(op.total_cycles for op in report.ops))
    assert report.npu_cycles == pytest.approx(sum(op.npu_cycles for op in report.ops))
    assert report.macs == sum(op.macs for op in report.ops)
    for area in ("sram", "offchip_flash"):
        rows = sum(op.bytes_read[area] + op.bytes_written[area] for op in report.ops)
        assert report.bytes(area) == pytest.approx(rows)
    assert report.inference_time_s == pytest.approx(report.total_cycles / 500e6)
    for op in report.ops:
        assert op.total_cycles == max(op.npu_cycles, *op.access_cycles.values())


def test_macs_and_traffic_follow_the_shapes():
    report = evaluate(_schedule(), system_memory(ACCEL, *U55, 1 << 20))
    conv, dw, add = report.ops
    assert conv.macs == 56 * 56 * 144 * 24
    assert dw.macs == 56 * 56 * 144 * 9
    assert add.macs == 0
    assert conv.bytes_written["sram"] == 56 * 56 * 144  # int8 OFM written once
    assert add.bytes_read["sram"] == 2 * 56 * 56 * 24
    assert conv.bytes_read["offchip_flash"] > 0  # weights streamed from flash
    assert add.bytes_read["offchip_flash"] == 0


def test_a_smaller_sram_never_lowers_the_cycles_of_the_same_schedule():
    ops = _schedule(const_area="sram", source="offchip_flash")
    cycles = [evaluate(ops, system_memory(ACCEL, *U55, size)).total_cycles
              for size in (4 << 20, 1 << 20, 256 << 10, 64 << 10)]  # fmt: skip
    assert cycles == sorted(cycles)


def test_double_buffered_weights_hide_more_of_the_copy_than_single():
    memory = system_memory(ACCEL, *U55, 1 << 20)
    desc = CONV
    slices = _weight_ranges(desc, depth_slices=3)
    bounds = np.array_split(np.arange(desc.ofm_shape[2]), 3)
    stripes = []
    for (w, b), channels in zip(slices, bounds, strict=False):
        part = dataclasses.replace(desc, ofm_shape=(56, 56, len(channels)))
        stripes.append(_stripe(part, (w, b)))

    def cycles(buffering):
        copies = tuple(w[0].length + b[0].length for w, b in slices)
        op = ScheduledOp("conv", tuple(stripes), const_area="sram",
                         weight_source_area="offchip_flash", weight_buffering=buffering,
                         weight_copies=copies)  # fmt: skip
        return evaluate([op], memory).ops[0]

    single, double = cycles("single"), cycles("double")
    assert double.npu_cycles <= single.npu_cycles
    assert single.bytes_read["offchip_flash"] == sum(w[0].length + b[0].length for w, b in slices)
    assert single.bytes_written["sram"] > 56 * 56 * 144  # OFM plus the weight copy


def test_striping_an_op_costs_at_least_as_much_as_running_it_whole():
    memory = system_memory(ACCEL, *U55, 1 << 20)
    whole = evaluate([ScheduledOp("dw", (_stripe(DEPTHWISE),))], memory).total_cycles
    half_in = dataclasses.replace(DEPTHWISE, ifm_shape=(30, 56, 144), ofm_shape=(28, 56, 144))
    halves = evaluate([ScheduledOp("dw", (_stripe(half_in), _stripe(half_in)))], memory)
    assert halves.ops[0].stripes == 2
    assert halves.total_cycles >= whole


def test_activations_in_dram_cost_more_than_in_sram_on_u65():
    sram = system_memory("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", 1 << 20)
    op = _stripe(ADD)
    in_sram = evaluate([ScheduledOp("add", (op,), "sram", "sram")], sram).total_cycles
    in_dram = evaluate([ScheduledOp("add", (op,), "dram", "dram")], sram).total_cycles
    assert in_dram > in_sram


def test_unknown_areas_are_refused():
    with pytest.raises(ValueError, match="unknown memory area"):
        ScheduledOp("add", (_stripe(ADD),), ifm_area="l2")


def _sliced_conv(addresses, buffering):
    """CONV in four OFM-depth slices whose weights are DMA-copied from flash, each just before
    its slice runs, into SRAM at `addresses` (cycled); every slice runs the whole op's block."""
    block = _stripe(CONV).block_config
    slices = _weight_ranges(CONV, depth_slices=4)
    bounds = np.array_split(np.arange(CONV.ofm_shape[2]), 4)
    stripes = []
    for index, ((w, b), channels) in enumerate(zip(slices, bounds, strict=True)):
        base = addresses[index % len(addresses)]
        moved = ([NpuAddressRange(0, base + b[0].length, w[0].length)],
                 [NpuAddressRange(0, base, b[0].length)])  # fmt: skip
        part = dataclasses.replace(CONV, ofm_shape=(56, 56, len(channels)))
        stripes.append(_stripe(part, moved))
        stripes[-1].block_config = block
    copies = tuple(w[0].length + b[0].length for w, b in slices)
    return ScheduledOp("conv", tuple(stripes), const_area="sram",
                       weight_source_area="offchip_flash", weight_buffering=buffering,
                       weight_copies=copies)  # fmt: skip


def _compute_cycles(op: ScheduledOp, memory) -> tuple[float, float]:
    """NPU cycles of `op` whole, and of its last stripe, with the weights read in place."""

    def npu(stripes):
        in_place = ScheduledOp("conv", stripes, const_area="sram")
        return evaluate([in_place], memory).ops[0].npu_cycles

    return npu((_stripe(CONV, _weight_ranges(CONV)[0]),)), npu(op.stripes[-1:])


def test_single_buffered_slices_at_one_address_are_each_copied_in_series():
    """Every slice of a single buffer lands at the same address; each is still a DMA, and
    none but the first can overlap compute (nothing runs before this op to hide it). Vela
    never streams weights so: each slice is costed as the stripe it is."""
    memory = system_memory(ACCEL, *U55, 1 << 20)
    op = _sliced_conv([0], "single")
    row = evaluate([op], memory).ops[0]
    total = sum(op.weight_copies)
    copy = measure_mem2mem_cycles(memory.arch, MemArea.OffChipFlash, MemArea.Sram, total)
    compute = sum(
        evaluate([ScheduledOp("conv", (s,), const_area="sram")], memory).ops[0].npu_cycles
        for s in op.stripes
    )
    assert row.bytes_read["offchip_flash"] == total
    assert row.npu_cycles == pytest.approx(compute + copy)


def test_double_buffered_slices_are_each_copied_under_the_slice_before():
    """Each later slice's DMA overlaps the previous slice's compute: the op takes the longer
    of the first copy plus all compute, and all copies plus the last slice's compute."""
    memory = system_memory(ACCEL, *U55, 1 << 20)
    op = _sliced_conv([0, 1 << 16], "double")
    row = evaluate([op], memory).ops[0]
    flash_to_sram = (memory.arch, MemArea.OffChipFlash, MemArea.Sram)
    first = measure_mem2mem_cycles(*flash_to_sram, op.weight_copies[0])
    full = measure_mem2mem_cycles(*flash_to_sram, sum(op.weight_copies))
    compute, tail = _compute_cycles(op, memory)
    assert row.bytes_read["offchip_flash"] == sum(op.weight_copies)
    assert row.npu_cycles == pytest.approx(max(compute + first, full + tail))
    # Single-buffered, each later copy waits for the slice before (and the slices are
    # costed one by one, as that schedule runs): the copies add to the compute.
    single = evaluate([dataclasses.replace(op, weight_buffering="single")], memory).ops[0]
    stripes = single.npu_cycles - full  # nothing runs before it to hide the first
    in_place = [ScheduledOp("conv", (s,), const_area="sram") for s in op.stripes]
    assert stripes == pytest.approx(sum(evaluate([s], memory).ops[0].npu_cycles for s in in_place))


def test_only_the_copies_the_schedule_makes_are_charged():
    """Stripes that read what their buffer already holds add no DMA, whatever their address."""
    memory = system_memory(ACCEL, *U55, 1 << 20)
    op = _sliced_conv([0, 1 << 16, 2 << 16, 3 << 16], "single")
    once = dataclasses.replace(op, weight_copies=(op.weight_copies[0], 0, 0, 0))
    assert evaluate([once], memory).ops[0].bytes_read["offchip_flash"] == op.weight_copies[0]
    with pytest.raises(ValueError, match="one entry per stripe"):
        dataclasses.replace(op, weight_copies=op.weight_copies[:2])


def test_a_weight_streamed_op_reads_its_input_once_as_vela_costs_it():
    """Vela's estimate costs an op streamed in depth slices whole: one IFM read, not one per
    slice as the hardware does."""
    memory = system_memory(ACCEL, *U55, 1 << 20)
    op = _sliced_conv([0, 1 << 16], "double")
    in_place = ScheduledOp("conv", (_stripe(CONV, _weight_ranges(CONV)[0]),), const_area="sram")
    whole = evaluate([in_place], memory).ops[0]
    sliced = evaluate([op], memory).ops[0]
    ifm_bytes = 56 * 56 * 24
    assert sliced.macs == whole.macs
    assert abs(sliced.bytes_read["sram"] - whole.bytes_read["sram"]) < ifm_bytes / 4


def test_a_second_input_is_read_at_its_own_element_size_and_layout():
    memory = system_memory(ACCEL, *U55, 1 << 20)

    def ifm2_from_flash(dtype, layout):
        op = _stripe(ADD)
        op.ifm2.data_type, op.ifm2.layout = dtype, layout
        return evaluate([ScheduledOp("add", (op,), ifm2_area="offchip_flash")], memory).ops[0]

    int8 = ifm2_from_flash(NpuDataType.INT8, NpuLayout.NHWC)
    int16 = ifm2_from_flash(NpuDataType.INT16, NpuLayout.NHWC)
    assert int8.bytes_read["offchip_flash"] == 56 * 56 * 24
    assert int16.bytes_read["offchip_flash"] == 2 * 56 * 56 * 24
    brick = ifm2_from_flash(NpuDataType.INT8, NpuLayout.NHCWB16)
    assert brick.access_cycles["offchip_flash"] != int8.access_cycles["offchip_flash"]


def test_a_lookup_table_copy_costs_its_dma_unless_the_previous_op_hides_it():
    memory = system_memory(ACCEL, *U55, 1 << 20)
    tanh = _stripe(dataclasses.replace(ADD, activation="TANH"))
    plain = ScheduledOp("add", (tanh,))
    with_lut = dataclasses.replace(plain, lut_source_area="offchip_flash", lut_bytes=1024)
    dma = measure_mem2mem_cycles(memory.arch, MemArea.OffChipFlash, MemArea.Shram, 1024)

    alone, first = evaluate([plain], memory).ops[0], evaluate([with_lut], memory).ops[0]
    assert first.npu_cycles == alone.npu_cycles + dma
    assert first.bytes_read["offchip_flash"] == 1024
    assert first.access_cycles == alone.access_cycles

    conv = _schedule()[0]
    after_conv = evaluate([conv, with_lut], memory).ops[1]
    assert after_conv.npu_cycles == alone.npu_cycles

    with pytest.raises(ValueError, match="no lut_source_area"):
        ScheduledOp("add", (tanh,), lut_bytes=1024)


def test_codegen_hands_the_evaluator_every_weight_dma_of_the_schedule():
    """A layer-by-layer schedule streams a conv's 144 KiB of weights in double-buffered depth
    slices; each slice's weight and scale-bias DMAs are charged to the stripe that reads them,
    though a slice is copied before the slice ahead of it runs."""
    b = ModelBuilder(0, name="deep_pointwise")
    x = b.conv2d(b.input((1, 8, 8, 16)), 64, kernel=1)
    b.output(b.conv2d(x, 256, kernel=3))
    prepared = prepared_model(b.build(), ACCEL)
    ops = prepared.network.ops
    memory = system_memory(ACCEL, *U55, 192 * 1024)
    schedule = layer_by_layer_schedule(prepared.network, memory, encoded_size(ACCEL, ops))
    compiled = generate(schedule, ACCEL, command_streams=False)
    deep = max(range(len(ops)), key=lambda part: ops[part].ofm.shape[3])
    slices = [s for s in schedule.steps if isinstance(s, Copy) and s.part == deep]
    op = next(op for op in compiled.scheduled_ops if op.name == ops[deep].name)
    assert op.weight_buffering == "double"
    assert len(slices) == 2 * len(op.stripes)  # weights and scale-bias of every slice
    assert all(n > 0 for n in op.weight_copies)
    dmas = [
        d.src.length
        for d in compiled.functions[0].operations
        if isinstance(d, NpuDmaOperation) and d.src.region == REGION_CONSTANTS
    ]
    assert sum(sum(o.weight_copies) for o in compiled.scheduled_ops) == sum(dmas)
    row = evaluate([op], memory).ops[0]
    assert row.bytes_read["offchip_flash"] == sum(op.weight_copies)


def test_a_feature_map_copy_adds_its_dma_to_the_op_that_waits_for_it():
    """Each copy of an input feature map into the op's buffer is charged in series with the
    op's compute, its source's latency included; its bytes count as moved, not as access."""
    memory = system_memory("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", 1 << 20)
    plain = ScheduledOp("add", (_stripe(ADD),))
    copies = (("dram", "sram", 4096), ("dram", "sram", 1024))
    copied = dataclasses.replace(plain, feature_map_copies=copies)
    dma = sum(
        measure_mem2mem_cycles(memory.arch, MemArea.Dram, MemArea.Sram, n) for n in (4096, 1024)
    )
    alone, waits = evaluate([plain], memory).ops[0], evaluate([copied], memory).ops[0]
    assert dma > 2 * memory.arch.memory_latency[MemArea.Dram][0]
    assert waits.npu_cycles == alone.npu_cycles + dma
    assert waits.bytes_read["dram"] == alone.bytes_read["dram"] + 5120
    assert waits.bytes_written["sram"] == alone.bytes_written["sram"] + 5120
    assert waits.access_cycles == alone.access_cycles
    with pytest.raises(ValueError, match="unknown memory area"):
        dataclasses.replace(plain, feature_map_copies=(("disk", "sram", 16),))


def test_codegen_hands_the_evaluator_every_feature_map_dma_of_the_schedule():
    """On U65 a cascade copies feature maps from the DRAM arena into SRAM stripe by stripe;
    every one of those DMAs reaches the op whose stripes read the copy."""
    b = ModelBuilder(0, name="u65_chain")
    x = b.conv2d(b.input((1, 32, 32, 16)), 16, kernel=3, activation="RELU")
    b.output(b.conv2d(x, 16, kernel=3))
    prepared = prepared_model(b.build(), "ethos-u65-256")
    memory = system_memory("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", 64 * 1024)
    options = CascaderOptions(enable_striping=True, always_copy_size=1 << 20)
    schedule = prepared.scheduler.schedule_point(memory, options).schedule
    copies = [s for s in schedule.steps if isinstance(s, Copy) and s.what == "feature_map"]
    assert len(copies) > 1
    compiled = generate(schedule, "ethos-u65-256", command_streams=False)
    dmas = [
        d.src.length
        for d in compiled.functions[0].operations
        if isinstance(d, NpuDmaOperation) and d.src.region != REGION_CONSTANTS
    ]
    charged = [c for op in compiled.scheduled_ops for c in op.feature_map_copies]
    assert len(charged) == len(copies)
    assert sum(n for _, _, n in charged) == sum(dmas)
    assert {(src, dst) for src, dst, _ in charged} == {("dram", "sram")}


def test_each_dma_of_a_weight_copy_pays_the_sources_latency():
    """Our streams copy weights and scale-bias in two DMAs, each paying the source's latency;
    Vela's copy is one, and `weight_copy_dmas` left empty costs them so."""
    memory = system_memory(ACCEL, *U55, 1 << 20)
    op = _sliced_conv([0], "single")
    split = tuple((n - 160, 160) for n in op.weight_copies)
    two = evaluate([dataclasses.replace(op, weight_copy_dmas=split)], memory).ops[0]
    one = evaluate([op], memory).ops[0]
    flash_to_sram = (memory.arch, MemArea.OffChipFlash, MemArea.Sram)
    expected = sum(
        measure_mem2mem_cycles(*flash_to_sram, a) + measure_mem2mem_cycles(*flash_to_sram, b)
        for a, b in split
    ) - measure_mem2mem_cycles(*flash_to_sram, sum(op.weight_copies))
    assert two.npu_cycles - one.npu_cycles == pytest.approx(expected)
    assert two.bytes_read == one.bytes_read
