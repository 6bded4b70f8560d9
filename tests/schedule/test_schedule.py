"""Stripe schedules of real models: every read finds the data it needs in its buffer, buffers
live at the same time never share bytes, SRAM never exceeds the pool, outputs are covered."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sessions import prepared_model

from cascader.core.cascade import cascade
from cascader.core.options import CascaderOptions
from cascader.core.part import in_place_input
from cascader.ethosu.codegen import generate
from cascader.ethosu.graph import graph_document
from cascader.ethosu.memory import system_memory
from cascader.ethosu.perf import evaluate
from cascader.ethosu.weights import encoded_weights
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.boxes import Box, copy_box, input_boxes
from cascader.ir.errors import ScheduleError
from cascader.ir.npu_ops import Conv2D, Identity
from cascader.ir.schedule import Copy, Schedule, Stripe
from cascader.reference.striped import StripedExecutor
from cascader.schedule.policies import layer_by_layer_schedule, proposal_schedule
from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir
from cascader.testing.tflite_builder import ModelBuilder
from cascader.verify.litert import random_inputs
from cascader.verify.model_reference import ModelReference

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")


@pytest.fixture(scope="module")
def example():
    return prepared_model(load_tflite(EXAMPLE), "ethos-u55-256")


def _sizer(prepared, accelerator):
    return lambda part, lo, hi, depth: len(
        encoded_weights(accelerator, prepared.network.ops[part], lo, hi, depth)
    )


def _roots(schedule: Schedule) -> dict[int, int]:
    """Graph tensor -> the tensor whose bytes it is (reshapes alias their input, the copies
    of a concatenation its output, an input written in place its concatenation)."""
    net = schedule.network
    placed = {p.id for p in net.graph.parts if _in_place(net.ops[p.id])}
    alias = {p.output.id: p.inputs[0].id for p in net.graph.parts if p.in_line}
    alias.update(net.co_written)
    for pid in placed:
        part = net.graph.parts[pid]
        del alias[part.output.id]
        alias[part.inputs[0].id] = net.co_written.get(part.output.id, part.output.id)
    roots = {}
    for t in schedule.network.graph.tensors:
        tid = t.id
        while tid in alias:
            tid = alias[tid]
        roots[t.id] = tid
    return roots


def _in_place(op) -> bool:
    return isinstance(op, Identity) and op.operator == "IN_PLACE"


def _offsets(schedule: Schedule) -> dict[int, tuple[int, ...]]:
    """Graph tensor -> where it starts in its concatenation, for inputs written in place."""
    net = schedule.network
    return {
        p.inputs[0].id: tuple(net.ops[p.id].ofm_offset)
        for p in net.graph.parts
        if _in_place(net.ops[p.id])
    }


def _slice(box: Box, offset: tuple[int, ...] = ()) -> tuple[slice, ...]:
    offset = offset or (0,) * len(box.start)
    pairs = zip(box.start, box.shape, offset, strict=True)
    return tuple(slice(s + o, s + o + n) for s, n, o in pairs)


def check_schedule(schedule: Schedule) -> None:
    """Replays the schedule on presence masks: each buffer remembers which elements of its
    tensor it holds (a window only its last box, a rolling buffer its last `rows` rows), and
    every read must be held; weights read from a copy must be the copied channels."""
    net = schedule.network
    graph = net.graph
    roots, offsets = _roots(schedule), _offsets(schedule)
    held: dict[int, np.ndarray] = {}
    copied: dict[int, tuple] = {}
    for buf in schedule.buffers:
        if not graph.tensors[buf.tensor].is_constant:
            held[buf.index] = np.zeros(net.feature_map(buf.tensor).shape, dtype=bool)
    for t in graph.input_tensors:
        if not t.is_constant and roots[t.id] in schedule.tensor_buffer:
            held[schedule.tensor_buffer[roots[t.id]]][...] = True
    for index, step in enumerate(schedule.steps):
        if isinstance(step, Copy):
            if step.what == "feature_map":
                assert held[step.source][_slice(step.box)].all(), step
                held[step.dest][...] = False
                held[step.dest][_slice(step.box)] = True
            else:
                copied[step.dest] = (step.part, step.what, step.box)
            continue
        part = graph.parts[step.part]
        op = net.ops[step.part]
        boxes, padding = input_boxes(op, step.ofm)
        assert padding == step.padding
        for slot, (box, buf, _) in enumerate(step.ifms):
            if buf < 0:
                continue
            assert box == boxes[slot]
            assert schedule.buffers[buf].tensor == roots[part.inputs[slot].id]
            at = offsets.get(part.inputs[slot].id, ())
            assert held[buf][_slice(box, at)].all(), (op.name, slot, box)
            # live while the stripe reads it, so no buffer allocated meanwhile overlaps it
            assert schedule.buffers[buf].first <= index <= schedule.buffers[buf].last
        if step.weights_buffer >= 0:
            lo, hi = step.channels
            assert copied[step.weights_buffer] == (step.part, "weights", Box((lo,), (hi - lo,)))
        out = schedule.buffers[step.ofm_buffer]
        assert out.tensor == roots[part.output.id]
        mask = held[out.index]
        if out.kind == "window":
            assert step.ofm_origin == step.ofm.start
            mask[...] = False
        written = step.ofm
        if isinstance(op, Identity) and op.ifm.shape != op.ofm.shape and op.ofm_fill is None:
            written = copy_box(op, step.ofm)[1]  # a concatenation's copy writes its slice
        mask[_slice(written, offsets.get(part.output.id, ()))] = True
        if out.kind == "rolling":
            mask[:, : max(step.ofm.end[1] - out.rows, 0)] = False
    for t in graph.output_tensors:
        assert held[schedule.tensor_buffer[roots[t.id]]].all()


def written_over_pairs(schedule: Schedule) -> set[tuple[int, int]]:
    """(input, output) buffers an elementwise op may share: its output written exactly over
    an input that only it reads, after the input's last write (Vela's in-place outputs)."""
    graph = schedule.network.graph
    last_write: dict[int, int] = {}
    for index, step in enumerate(schedule.steps):
        last_write[step.ofm_buffer if isinstance(step, Stripe) else step.dest] = index
    pairs = set()
    for index, step in enumerate(schedule.steps):
        if not isinstance(step, Stripe):
            continue
        slot = in_place_input(graph.parts[step.part])
        source = step.ifms[slot][1] if slot >= 0 else -1
        a, b = schedule.buffers[source], schedule.buffers[step.ofm_buffer]
        if slot < 0 or (a.address, a.size) != (b.address, b.size):
            continue
        readers = {s.part for s in schedule.steps if isinstance(s, Stripe)
                   for _, buf, _ in s.ifms if buf == source}  # fmt: skip
        assert readers == {step.part} and last_write[source] < index
        pairs.add((source, step.ofm_buffer))
    return pairs


def _rows(buf, box) -> tuple[int, int]:
    """The addresses of the whole rows of a whole-tensor buffer that `box` covers."""
    row = buf.size // buf.frame[1]
    first, end = max(box.start[1], 0), min(box.end[1], buf.frame[1])
    return buf.address + first * row, buf.address + max(end, first) * row


def _laid_safely(schedule: Schedule, a, b) -> bool:
    """Whether two whole tensors live at once may share bytes as an output laid over its
    input: neither moved by a DMA, the input complete before the output's first write, and
    no kernel writing the output writes rows that it or a later kernel reads of the input."""
    if a.kind != "tensor" or b.kind != "tensor" or len(a.frame) != 4 or len(b.frame) != 4:
        return False
    steps = schedule.steps
    if any(isinstance(s, Copy) and {s.source, s.dest} & {a.index, b.index} for s in steps):
        return False
    writes = {a.index: [], b.index: []}
    reads = {a.index: [], b.index: []}
    for index, step in enumerate(steps):
        if isinstance(step, Copy):
            continue
        if step.ofm_buffer in writes:
            writes[step.ofm_buffer].append(
                (index, _rows(schedule.buffers[step.ofm_buffer], step.ofm))
            )
        for box, buf, _ in step.ifms:
            if buf in reads:
                reads[buf].append((index, _rows(schedule.buffers[buf], box)))
    if not writes[a.index] and not writes[b.index]:
        return False
    # The host writes a graph input before the first step: that one is the input.
    first_write = {i: found[0][0] if found else -1 for i, found in writes.items()}
    out, source = (b, a) if first_write[b.index] > first_write[a.index] else (a, b)
    start = first_write[out.index]
    if any(j >= start for j, _ in writes[source.index]):
        return False
    return all(
        w_end <= r_lo or r_end <= w_lo
        for k, (w_lo, w_end) in writes[out.index]
        for j, (r_lo, r_end) in reads[source.index]
        if j >= k
    )


def check_allocation(schedule: Schedule) -> None:
    """Aligned addresses; buffers of one region alive at the same time never overlap, but
    for an elementwise output written over its input and an output laid over the input it
    consumes in row order (`_laid_safely`)."""
    by_region: dict[int, list] = {}
    for buf in schedule.buffers:
        assert buf.address % 16 == 0 and buf.size % 16 == 0
        by_region.setdefault(buf.region, []).append(buf)
    shared = written_over_pairs(schedule)
    for buffers in by_region.values():
        for i, a in enumerate(buffers):
            for b in buffers[i + 1 :]:
                if (a.index, b.index) in shared:
                    continue
                if a.first <= b.last and b.first <= a.last:
                    apart = a.address + a.size <= b.address or b.address + b.size <= a.address
                    assert apart or _laid_safely(schedule, a, b), (a, b)


def test_layer_by_layer_schedule_runs_every_op_whole_with_copied_constants(example) -> None:
    """Every op runs over its whole OFM, in one stripe or (double-buffered weights) in
    output-depth slices that tile it."""
    memory = system_memory(*U55, 256 * 1024)
    schedule = layer_by_layer_schedule(example.network, memory, _sizer(example, U55[0]))
    stripes = [s for s in schedule.steps if isinstance(s, Stripe)]
    npu_parts = [p for p in example.network.graph.parts if not p.in_line]
    assert {s.part for s in stripes} == {p.id for p in npu_parts}
    for part in npu_parts:
        shape = example.network.ops[part.id].ofm.shape
        depths = []
        for stripe in schedule.stripes_of(part.id):
            assert stripe.ofm.shape[:3] == shape[:3] and stripe.ofm.start[3] == sum(depths)
            depths.append(stripe.ofm.shape[3])
        assert sum(depths) == shape[3]
    copies = [s for s in schedule.steps if isinstance(s, Copy)]
    assert {c.what for c in copies} == {"weights", "scale_bias"}
    check_schedule(schedule)
    check_allocation(schedule)
    assert schedule.sram_bytes <= memory.sram_bytes


@pytest.mark.parametrize(
    "options",
    [
        CascaderOptions(enable_striping=True),
        CascaderOptions(enable_striping=False),
        CascaderOptions(enable_striping=True, enable_multi_dimensional_striping=True),
        CascaderOptions(enable_striping=True, always_copy_size=0),
    ],
    ids=["striping", "no-striping", "multi-dimensional", "copy-nothing-small"],
)
def test_cascaded_schedule_reads_only_what_was_written(example, options) -> None:
    memory = system_memory(*U55, 256 * 1024)
    point = example.scheduler.schedule_point(memory, replace(options, cascade_region="sram"))
    check_schedule(point.schedule)
    check_allocation(point.schedule)
    assert point.fits
    assert point.schedule.sram_bytes <= memory.sram_bytes
    # the cascader budgets what the schedule holds (plus 16-byte alignment of each buffer)
    slack = 16 * len(point.schedule.buffers)
    assert point.schedule.sram_bytes <= point.cascade.chosen.memory_usage + slack


def test_striped_plans_interleave_and_roll(example) -> None:
    memory = system_memory(*U55, 256 * 1024)
    point = example.scheduler.schedule_point(memory, CascaderOptions(enable_striping=True))
    schedule = point.schedule
    kinds = {b.kind for b in schedule.buffers}
    assert {"tensor", "window"} <= kinds
    multi = [p for p in point.cascade.chosen.plans if len(p.part_ids) > 1]
    assert multi, "the example's chosen proposal cascades some ops"
    plan_parts = set(multi[0].part_ids)
    order = [s.part for s in schedule.steps if isinstance(s, Stripe) and s.part in plan_parts]
    # producer and consumer stripes alternate instead of running op after op
    changes = sum(a != b for a, b in itertools.pairwise(order))
    assert changes > len(plan_parts)


def test_u65_puts_the_cascade_in_sram_and_the_arena_in_dram(example) -> None:
    prepared = prepared_model(load_tflite(EXAMPLE), U65[0])
    memory = system_memory(*U65, 128 * 1024)
    point = prepared.scheduler.schedule_point(memory, CascaderOptions(enable_striping=True))
    check_schedule(point.schedule)
    check_allocation(point.schedule)
    areas = {b.area for b in point.schedule.buffers}
    assert areas <= {"sram", "dram"}
    assert {b.region for b in point.schedule.buffers if b.area == "dram"} == {1}
    assert {b.region for b in point.schedule.buffers if b.area == "sram"} == {2}
    io = {t.id for t in prepared.network.graph.input_tensors if not t.is_constant}
    assert all(point.schedule.buffers[point.schedule.tensor_buffer[t]].area == "dram" for t in io)
    assert point.schedule.sram_bytes <= memory.sram_bytes


def test_a_pool_too_small_for_the_smallest_proposal_is_refused(example) -> None:
    memory = system_memory(*U55, 32 * 1024)
    document = graph_document(example.network.graph, memory, CascaderOptions())
    result = cascade(document.graph, document.regions, document.home_map, document.options)
    smallest = min(result.proposals, key=lambda p: p.memory_usage)
    assert smallest.memory_usage > memory.sram_bytes
    with pytest.raises(ScheduleError, match="bytes of SRAM but the pool has 32768"):
        proposal_schedule(example.network, smallest, memory, _sizer(example, U55[0]))
    point = example.scheduler.schedule_point(memory, CascaderOptions())
    assert not point.fits


@pytest.mark.parametrize("name", ["chain", "branches", "concat_skip", "CONCATENATION-width",
                                  "SPLIT-height-4", "PAD", "STRIDED_SLICE", "RESIZE_BILINEAR",
                                  "SOFTMAX-vector-beta", "MEAN", "TRANSPOSE_CONV"])  # fmt: skip
def test_builder_models_schedule_validly(name: str) -> None:
    prepared = prepared_model(CATALOGUE[name]().build(), U55[0])
    memory = system_memory(*U55, 256 * 1024)
    for options in (None, CascaderOptions(enable_striping=True)):
        point = prepared.scheduler.schedule_point(memory, options)
        check_schedule(point.schedule)
        check_allocation(point.schedule)


def test_schedules_are_deterministic(example) -> None:
    memory = system_memory(*U55, 256 * 1024)
    runs = [example.scheduler.schedule_point(memory, CascaderOptions(enable_striping=True))
            for _ in range(2)]  # fmt: skip
    first, second = (r.schedule for r in runs)
    assert first.steps == second.steps
    assert [b.to_json() for b in first.buffers] == [b.to_json() for b in second.buffers]


def test_fastest_blocks_beat_the_cascaders_blocks_under_vela(example) -> None:
    """Each part runs with the block config Vela's model finds fastest, which must not lose
    to the block config the cascader's own cost picked."""
    memory = system_memory(*U55, 256 * 1024)
    cycles = {}
    for blocks in ("fastest", "cascader"):
        schedule = layer_by_layer_schedule(
            example.network, memory, _sizer(example, U55[0]), blocks=blocks
        )
        compiled = generate(schedule, U55[0], command_streams=False)
        cycles[blocks] = evaluate(compiled.scheduled_ops, memory).total_cycles
    assert cycles["fastest"] < cycles["cascader"]


@pytest.mark.parametrize(
    ("name", "system", "options"),
    [
        ("chain", U65, CascaderOptions(enable_striping=True, always_copy_size=1 << 20)),
        ("residual", U65, CascaderOptions(enable_striping=True, always_copy_size=1 << 20)),
        ("residual", ("ethos-u55-64", *U55[1:]),
         CascaderOptions(enable_striping=True, enable_multi_dimensional_striping=True)),
        ("MEAN", U65, CascaderOptions(enable_striping=True, always_copy_size=1 << 20)),
    ],
    ids=["u65-copies", "u65-residual-copies", "u55-64-multi-dimensional", "u65-mean"],
)  # fmt: skip
def test_copied_feature_maps_and_channel_stripes_compile(name, system, options) -> None:
    """Feature maps copied into the SRAM stripe by stripe (Dedicated_Sram) and channel
    stripes of brick-layout tensors give valid schedules Vela's command-stream generator
    accepts (it checks every address's alignment)."""
    prepared = prepared_model(CATALOGUE[name]().build(), system[0])
    point = prepared.scheduler.schedule_point(system_memory(*system, 64 * 1024), options)
    check_schedule(point.schedule)
    check_allocation(point.schedule)
    compiled = generate(point.schedule, system[0])
    assert all(f.command_stream for f in compiled.functions)


def test_u65_copies_feature_maps_into_sram_stripe_by_stripe() -> None:
    prepared = prepared_model(load_tflite(EXAMPLE), U65[0])
    options = CascaderOptions(enable_striping=True, always_copy_size=1 << 20)
    point = prepared.scheduler.schedule_point(system_memory(*U65, 64 * 1024), options)
    copies = [s for s in point.schedule.steps if isinstance(s, Copy) and s.what == "feature_map"]
    assert copies
    assert all(point.schedule.buffers[c.source].area == "dram" for c in copies)
    assert all(point.schedule.buffers[c.dest].area == "sram" for c in copies)
    check_schedule(point.schedule)
    check_allocation(point.schedule)
    assert all(f.command_stream for f in generate(point.schedule, U65[0]).functions)


def _two_functions() -> bytes:
    """conv -> strided slice over channels (host) -> conv: two NPU functions."""
    b = ModelBuilder(0, name="two_functions")
    x = b.conv2d(b.input((1, 16, 16, 8)), 8, kernel=3, activation="RELU")
    x = b.strided_slice(x, [0, 0, 0, 0], [1, 16, 16, 8], [1, 1, 1, 2])
    b.output(b.conv2d(x, 8, kernel=1))
    return b.build()


@pytest.mark.parametrize("options", [None, CascaderOptions(enable_striping=True)])
def test_host_ops_split_the_schedule_into_functions(options) -> None:
    prepared = prepared_model(_two_functions(), U55[0])
    assert len(prepared.network.functions) == 2 and prepared.host_ops
    point = prepared.scheduler.schedule_point(system_memory(*U55, 256 * 1024), options)
    schedule = point.schedule
    check_schedule(schedule)
    check_allocation(schedule)
    functions = [schedule.network.function_of[s.part] for s in schedule.steps]
    assert functions == sorted(functions)  # the first function runs whole before the second
    last_of_first = functions.index(1) - 1
    graph = schedule.network.graph
    for tensor in graph.output_tensors:  # outputs stay live to their function's end
        buf = schedule.buffers[schedule.tensor_buffer[tensor.id]]
        function = schedule.network.function_of[tensor.producers[0].id]
        assert buf.last >= (last_of_first if function == 0 else len(schedule.steps) - 1)
    compiled = generate(schedule, U55[0])
    assert len(compiled.functions) == 2


@pytest.mark.parametrize(
    "system",
    [U55, U65, ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Sram_Only")],
    ids=["u55-shared", "u65-dedicated", "u55-sram-only"],
)
def test_layer_by_layer_buffers_weights_where_vela_does(system) -> None:
    """Vela's scheduler reads a fully connected layer's weights in place and every op's in
    place when the constants already live in the fast storage; other convolutions' weights
    are DMA-copied into the SRAM first."""
    prepared = prepared_model(CATALOGUE["chain"]().build(), system[0])
    memory = system_memory(*system, 256 * 1024)
    schedule = layer_by_layer_schedule(prepared.network, memory, _sizer(prepared, system[0]))
    check_schedule(schedule)
    check_allocation(schedule)
    ops = prepared.network.ops
    copied = {c.part for c in schedule.steps if isinstance(c, Copy) and c.what == "weights"}
    weighted = {s.part for s in schedule.steps if isinstance(s, Stripe) and s.channels}
    fully_connected = {p for p in weighted if ops[p].kind == "fully_connected"}
    assert fully_connected and not copied & fully_connected
    if memory.constants_area == memory.cascade_area:
        assert not copied
    else:
        assert copied == weighted - fully_connected
    scheduled = generate(schedule, system[0], command_streams=False).scheduled_ops
    for op in scheduled:
        if op.const_area is not None and op.weight_source_area is None:
            assert op.const_area == memory.constants_area


def test_layer_by_layer_reads_weights_in_place_when_they_do_not_fit() -> None:
    """As Vela's scheduler: weights whose encoding does not fit the SRAM the op's feature maps
    leave free are read from the constants in place, and the schedule then fits the pool."""
    b = ModelBuilder(0, name="wide_pointwise")
    b.output(b.conv2d(b.input((1, 4, 4, 64)), 128, kernel=1))  # 8 KiB of weights
    prepared = prepared_model(b.build(), U55[0])
    sizer = _sizer(prepared, U55[0])
    copied = {}
    for pool in (32 * 1024, 8 * 1024):
        memory = system_memory(*U55, pool)
        schedule = layer_by_layer_schedule(prepared.network, memory, sizer, check=False)
        check_schedule(schedule)
        check_allocation(schedule)
        copied[pool] = any(isinstance(s, Copy) for s in schedule.steps)
        assert schedule.sram_bytes <= pool
    assert copied == {32 * 1024: True, 8 * 1024: False}


def test_u65_cascades_a_fully_connected_chain() -> None:
    """Feature maps homed in the SRAM or the DRAM arena (Dedicated_Sram) used to leave the
    cascader without a proposal on chains of small layers (ad_autoencoder)."""
    b = ModelBuilder(0, name="fc_chain")
    x = b.input((1, 640))
    for units in (128, 128, 128, 8, 128, 128, 128):
        x = b.fully_connected(x, units, activation="RELU")
    b.output(b.fully_connected(x, 640))
    prepared = prepared_model(b.build(), U65[0])
    for copy_size in (1024, 1 << 20):
        options = CascaderOptions(enable_striping=True, always_copy_size=copy_size)
        point = prepared.scheduler.schedule_point(system_memory(*U65, 64 * 1024), options)
        assert point.cascade.proposals and point.fits
        check_schedule(point.schedule)
        check_allocation(point.schedule)


def _deep_pointwise() -> bytes:
    b = ModelBuilder(0, name="deep_pointwise")
    x = b.conv2d(b.input((1, 8, 8, 16)), 64, kernel=1)
    b.output(b.conv2d(x, 256, kernel=3))  # 144 KiB of weights
    return b.build()


def _compute_bound_conv() -> bytes:
    """A 3x3 convolution computing longer than its 72 KiB of weights take to stream in, on a
    map wider than any block (so reading them in place would fetch them again per block)."""
    b = ModelBuilder(0, name="compute_bound_conv")
    x = b.conv2d(b.input((1, 24, 24, 16)), 64, kernel=1)
    b.output(b.conv2d(x, 128, kernel=3))
    return b.build()


def _check_double_buffered(schedule: Schedule, part: int) -> None:
    """The part runs in output-depth slices whose weights alternate between two buffers,
    slice k+1's copy issued right after slice k's operation (so it runs while slice k
    computes, and on a one-DMA queue it does not hold slice k back)."""
    slices = schedule.stripes_of(part)
    assert len(slices) >= 2
    buffers = [s.weights_buffer for s in slices]
    assert len(set(buffers)) == 2 and all(a != b for a, b in itertools.pairwise(buffers))
    order = {id(step): i for i, step in enumerate(schedule.steps)}
    for k, stripe in enumerate(slices[:-1]):
        upcoming = slices[k + 1].channels
        loads = [
            i
            for i, step in enumerate(schedule.steps)
            if isinstance(step, Copy) and step.part == part and step.what == "weights"
            and (step.box.start[0], step.box.end[0]) == upcoming
        ]  # fmt: skip
        assert loads and loads[0] == order[id(stripe)] + 1


def _check_double_beats_single(scheduled: list, name: str, memory) -> None:
    """The op is costed double-buffered, and so beats copying its weights in one go."""
    index = [op.name for op in scheduled].index(name)
    assert scheduled[index].weight_buffering == "double"
    double = evaluate(scheduled, memory).ops
    single = evaluate([replace(op, weight_buffering="single") for op in scheduled], memory).ops
    assert double[index].total_cycles < single[index].total_cycles


def test_layer_by_layer_double_buffers_big_weights_in_depth_slices() -> None:
    """As Vela's scheduler: weights too big to prebuffer under the previous op are copied in
    output-depth slices into two alternating buffers, slice k+1's copy issued after slice k's
    operation; the op is costed as double-buffered and beats copying its weights in one go."""
    prepared = prepared_model(_deep_pointwise(), U55[0])
    memory = system_memory(*U55, 192 * 1024)
    schedule = layer_by_layer_schedule(prepared.network, memory, _sizer(prepared, U55[0]))
    check_schedule(schedule)
    check_allocation(schedule)
    deep = max(prepared.network.ops, key=lambda op: op.ofm.shape[3])
    _check_double_buffered(schedule, prepared.network.ops.index(deep))
    compiled = generate(schedule, U55[0])
    again = layer_by_layer_schedule(prepared.network, memory, _sizer(prepared, U55[0]))
    stream = compiled.functions[0].command_stream
    assert stream and stream == generate(again, U55[0]).functions[0].command_stream
    _check_double_beats_single(compiled.scheduled_ops, deep.name, memory)


def test_cascader_double_buffers_a_one_stripe_plans_copied_weights() -> None:
    """A cascader plan of one convolution in one stripe that copies its weights runs, as
    Vela's scheduler would, in output-depth slices with the weights double-buffered: slice
    k+1's copy is issued before slice k runs, the two buffers fit the plan's budget, and the
    op costs less than copying its weights in one go. (Where the op is bound by streaming
    its weights, it reads them in place instead: see the flash-bound test below.)"""
    model = _compute_bound_conv()
    prepared = prepared_model(model, U55[0])
    memory = system_memory(*U55, 192 * 1024)
    options = CascaderOptions(always_copy_size=1 << 20)  # no striping: every plan one stripe
    point = prepared.scheduler.schedule_point(memory, options)
    schedule = point.schedule
    check_schedule(schedule)
    check_allocation(schedule)
    assert schedule.sram_bytes <= point.cascade.proposals[point.cascade.chosen_index].memory_usage
    deep = max(prepared.network.ops, key=lambda op: op.ofm.shape[3])
    _check_double_buffered(schedule, prepared.network.ops.index(deep))
    _check_double_beats_single(generate(schedule, U55[0]).scheduled_ops, deep.name, memory)
    inputs = random_inputs(model, np.random.default_rng(1))
    (expected,) = ModelReference.from_model(model, "compute_bound_conv")(inputs)
    (got,) = StripedExecutor(schedule).run(inputs)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_cascader_double_buffers_when_the_slices_only_add_alignment() -> None:
    """ic_resnet8 on U55 at a 52,528 B pool: the chosen proposal copies the weights of the
    second residual block's 16x16x32 convolution whole, in a one-stripe plan. Its two
    16-deep slices take 16 bytes more than the whole copy (the second buffer's alignment),
    and still run double-buffered: the second slice's copy hides under the first slice
    instead of delaying the op."""
    shared = shared_dir()
    model = shared / "models" / "ic_resnet8.tflite" if shared is not None else None
    if model is None or not model.is_file():
        pytest.skip("shared/models/ic_resnet8.tflite not available")
    prepared = prepared_model(load_tflite(model), U55[0])
    memory = system_memory(*U55, 52_528)
    options = CascaderOptions(
        enable_striping=True, stripe_factors=5, max_plan_size=10, max_proposals=64,
        always_copy_size=0, cost_model="vela",
    )  # fmt: skip
    point = prepared.scheduler.schedule_point(memory, options, proposal_region_bytes=4 << 20)
    schedule = point.schedule
    assert point.fits
    check_schedule(schedule)
    check_allocation(schedule)
    (conv,) = [
        i
        for i, op in enumerate(prepared.network.ops)
        if isinstance(op, Conv2D) and op.ifm.shape == op.ofm.shape == (1, 16, 16, 32)
    ]
    _check_double_buffered(schedule, conv)
    scheduled = generate(schedule, U55[0]).scheduled_ops
    _check_double_beats_single(scheduled, prepared.network.ops[conv].name, memory)


def _flash_bound_tail() -> bytes:
    """MobileNetV1's tail in small: a 1x1 convolution at 4x4 with 256 KiB of weights, then
    (after a mean) a fully connected layer with 128 KiB; both read each weight once, so
    streaming the weights from flash is what bounds them."""
    b = ModelBuilder(0, name="flash_bound_tail")
    x = b.conv2d(b.input((1, 4, 4, 512)), 512, kernel=1)
    x = b.reshape(b.mean(x, keep_dims=False), (1, 512))
    b.output(b.fully_connected(x, 256))
    return b.build()


def test_forced_weight_copies_of_flash_bound_layers_read_in_place() -> None:
    """Copying every constant (`always_copy_size` 1 MiB) makes the cascader copy the weights
    of flash-bound layers, where nothing hides the copy; the schedule reads them in place
    instead (Vela never buffers a fully connected layer's weights): no weight copies for
    them, no more SRAM than the proposal's budget, each op no slower than Vela's
    double-buffered copy of its weights (the layer-by-layer schedule), the same output."""
    model = _flash_bound_tail()
    prepared = prepared_model(model, U55[0])
    memory = system_memory(*U55, 320 * 1024)  # where Vela double-buffers the 1x1's weights
    options = CascaderOptions(enable_striping=True, always_copy_size=1 << 20, cost_model="vela")
    point = prepared.scheduler.schedule_point(memory, options)
    schedule = point.schedule
    assert point.fits
    check_schedule(schedule)
    check_allocation(schedule)
    assert schedule.sram_bytes <= point.cascade.proposals[point.cascade.chosen_index].memory_usage
    ops = prepared.network.ops
    bound = {
        i
        for i, op in enumerate(ops)
        if isinstance(op, Conv2D) and op.kind in ("conv2d", "fully_connected")
    }
    copied = {c.part for c in schedule.steps if isinstance(c, Copy) and c.what == "weights"}
    assert len(bound) == 2 and not copied & bound
    ours = {op.name: op for op in evaluate(generate(schedule, U55[0]).scheduled_ops, memory).ops}
    vela = layer_by_layer_schedule(prepared.network, memory, _sizer(prepared, U55[0]))
    theirs = {op.name: op for op in evaluate(generate(vela, U55[0]).scheduled_ops, memory).ops}
    for index in bound:
        name = ops[index].name
        assert ours[name].total_cycles <= theirs[name].total_cycles
    inputs = random_inputs(model, np.random.default_rng(1))
    (expected,) = ModelReference.from_model(model, "flash_bound_tail")(inputs)
    (got,) = StripedExecutor(schedule).run(inputs)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_a_weight_bound_convolution_copies_its_weights_but_not_its_scale_bias() -> None:
    """A 14x14x512 pointwise convolution (MobileNetV1's middle) waits for the copy of its
    256 KiB of weights, whose re-reads per OFM block rule out reading them in place; with
    every constant to be copied, it still reads its scale-bias in place beside its compute,
    which makes it faster than Vela's copy of both (the layer-by-layer schedule)."""
    b = ModelBuilder(0, name="weight_bound_pointwise")
    x = b.conv2d(b.input((1, 14, 14, 64)), 512, kernel=1)
    b.output(b.conv2d(x, 512, kernel=1))
    model = b.build()
    prepared = prepared_model(model, U55[0])
    memory = system_memory(*U55, 480 * 1024)
    options = CascaderOptions(enable_striping=True, always_copy_size=1 << 20, cost_model="vela")
    point = prepared.scheduler.schedule_point(memory, options)
    schedule = point.schedule
    assert point.fits
    check_schedule(schedule)
    check_allocation(schedule)
    deep = next(i for i, op in enumerate(prepared.network.ops) if op.ifm.shape[3] == 512)
    copied = {c.what for c in schedule.steps if isinstance(c, Copy) and c.part == deep}
    assert copied == {"weights"}
    name = prepared.network.ops[deep].name
    ours = {op.name: op for op in evaluate(generate(schedule, U55[0]).scheduled_ops, memory).ops}
    vela = layer_by_layer_schedule(prepared.network, memory, _sizer(prepared, U55[0]))
    theirs = {op.name: op for op in evaluate(generate(vela, U55[0]).scheduled_ops, memory).ops}
    assert ours[name].total_cycles < theirs[name].total_cycles
    inputs = random_inputs(model, np.random.default_rng(1))
    (expected,) = ModelReference.from_model(model, "weight_bound_pointwise")(inputs)
    (got,) = StripedExecutor(schedule).run(inputs)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


@pytest.mark.parametrize("options", [None, CascaderOptions(enable_striping=True)],
                         ids=["layer-by-layer", "cascaded"])  # fmt: skip
def test_a_plans_first_weight_copy_runs_under_the_plan_before(options) -> None:
    """Ping-pong: a plan's first weight copy is issued while the plan before still runs and
    its buffer is live from a stripe of that plan, so it never shares the bytes of the
    weights that plan reads (its DMA need not wait for the kernel before)."""
    prepared = prepared_model(CATALOGUE["chain"]().build(), U55[0])
    memory = system_memory(*U55, 256 * 1024)
    schedule = prepared.scheduler.schedule_point(memory, options).schedule
    check_schedule(schedule)
    check_allocation(schedule)
    buffers = schedule.buffers
    stripes = [(i, s) for i, s in enumerate(schedule.steps) if isinstance(s, Stripe)]
    hoisted = 0
    for index, step in enumerate(schedule.steps):
        if not isinstance(step, Copy) or step.what != "weights":
            continue
        before = [
            s for i, s in stripes if i < index and s.plan != schedule.stripes_of(step.part)[0].plan
        ]
        if not before or any(s.part == step.part for i, s in stripes if i < index):
            continue  # the first plan, or a later slice of the op's own weights
        previous_plan = before[-1].plan
        dest = buffers[step.dest]
        under = [i for i, s in stripes if s.plan == previous_plan and i < index]
        assert dest.first <= under[-1]
        for _, s in stripes:
            if s.plan == previous_plan and s.weights_buffer >= 0:
                other = buffers[s.weights_buffer]
                assert dest.address + dest.size <= other.address or (
                    other.address + other.size <= dest.address
                )
        hoisted += 1
    assert hoisted >= 2
