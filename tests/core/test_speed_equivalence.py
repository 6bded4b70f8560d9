"""The batched single-plan costing, batched propagation and array accumulation give exactly
what the plain per-plan arithmetic gives, on real graphs (the golden ones, with
multi-dimensional striping on). Whole-run equivalence before/after a core change is checked
by benchmarks/core_equivalence.py; the goldens pin the tvm model's proposals."""

import dataclasses
import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cascader.core.floats import f32
from cascader.core.memory_region import MemoryRegion
from cascader.core.overlay import overlaid_input, overlay_offset, overlay_saving
from cascader.core.pareto import cull_plans
from cascader.core.part import BufferMode, in_place_input
from cascader.core.plan_context import PlanContext, per_cycle
from cascader.core.plan_generation import generate_graph_plans
from cascader.core.propagator import Propagator
from cascader.core.single_plan_arrays import input_memory
from cascader.core.single_plans import generate_single_plans
from cascader.core.single_plans_tvm import accumulate
from cascader.core.single_plans_vela import vela_input
from cascader.core.stripe_config import count_stripes
from cascader.core.stripe_generation import generate_output_stripe_configs
from cascader.core.tensor import Tensor
from cascader.core.tensor_config import TensorConfigState
from cascader.ethosu.burst import burst_efficiencies, burst_efficiency
from cascader.ethosu.graph_json import load_graph
from cascader.ethosu.part import EthosuPart, _axis_window_sums, _window_sums

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

SHARED = Path(
    os.environ.get("CASCADER_SHARED", Path(__file__).resolve().parents[2].parent / "shared")
)
KWS = SHARED / "golden" / "kws_dscnn_s1_p64k.json"
MOBILENET = SHARED / "golden" / "mobilenet_v2_100_224_s1_p1024k.json"
needs_shared = pytest.mark.skipif(not MOBILENET.is_file(), reason=f"no {MOBILENET}")
BOUNDARY, INTERIOR = TensorConfigState.BOUNDARY, TensorConfigState.INTERIOR
ROLLING, RECOMPUTE = BufferMode.ROLLING, BufferMode.RECOMPUTE


def _scalar_accumulate(terms):
    total = 0
    for term in terms:
        total = int(f32(f32(total) + term))
    return total


TERMS = st.one_of(
    st.integers(0, 1 << 26).map(float),
    st.floats(0, 1e9, allow_nan=False).map(f32),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(TERMS, min_size=1, max_size=4), min_size=1, max_size=8))
def test_array_accumulation_is_the_single_precision_loop(rows):
    width = max(len(r) for r in rows)
    padded = [r + [0.0] * (width - len(r)) for r in rows]
    columns = [np.array([r[k] for r in padded]) for k in range(width)]
    got = accumulate(columns)
    assert got.tolist() == [_scalar_accumulate(r) for r in padded]


@pytest.mark.parametrize(
    ("stripes", "blocks", "scale"),
    [(3, 2, 1), (60, 40, 1), (200, 100, 1), (150, 100, 1000)],
    ids=["small", "deduplicated", "many", "wide-codes"],
)
def test_axis_window_sums_are_the_window_sums(stripes, blocks, scale):
    """Summing only the distinct windows (by integer code, or sorted codes when the codes
    span too much) gives every window's own sum."""
    rng = np.random.default_rng(stripes)
    axes = 4
    offset = rng.integers(-2, 1, axes)
    stride = rng.integers(1, 9, (blocks, axes)) * scale
    length = stride + rng.integers(0, 3, (blocks, axes))
    extent = rng.integers(10, 60, (stripes, axes)) * scale
    count = rng.integers(1, 30, (stripes, blocks, axes))
    columns = (offset[None, None, :], stride[None], length[None], extent[:, None], count)
    plain = _window_sums(*(np.broadcast_to(c, count.shape).reshape(-1) for c in columns))
    got = _axis_window_sums(offset, stride, length, extent, count)
    assert got.tolist() == plain.reshape(count.shape).tolist()


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([(1, 28, 28, 24), (1, 14, 2, 14, 16), (1, 7, 7, 1)]),
    st.sampled_from(["int8", "int16", "int32"]),
    st.integers(1, 128),
    st.booleans(),
    st.integers(1, 5).flatmap(
        lambda rank: st.lists(
            st.tuples(*[st.integers(1, 70)] * rank).map(tuple), min_size=1, max_size=12
        )
    ),
)
def test_burst_efficiencies_are_each_blocks_own(shape, dtype, burst_length, is_read, blocks):
    """The array burst efficiency of a block list equals the per-block one, float for float."""
    tensor = Tensor(0, shape, dtype)
    region = MemoryRegion("SRAM", 1 << 20, 8, 8, 0, 0, burst_length)
    assume(len(shape) < 5 or len(blocks[0]) >= 3)
    got = burst_efficiencies(tensor, tuple(blocks), region, is_read)
    assert got.tolist() == [burst_efficiency(tensor, b, region, is_read) for b in blocks]


def _document(path, **options):
    document = load_graph(path)
    document.options = dataclasses.replace(
        document.options, enable_multi_dimensional_striping=True, **options
    )
    return document


def _stripe_configs(part, options):
    return generate_output_stripe_configs(
        part, options.stripe_factors, True, options.enable_multi_dimensional_striping
    )


@needs_shared
def test_batched_propagation_is_propagation():
    document = _document(MOBILENET)
    for part in document.graph.parts:
        configs = _stripe_configs(part, document.options)
        for propagator in part.propagators:
            fresh = Propagator(propagator.transform.tolist(), list(propagator.offset))
            propagator.prepare(configs)
            for config in configs:
                batched, single = propagator.propagate(config), fresh.propagate(config)
                assert batched == single
                assert batched.strides == single.strides


@needs_shared
@pytest.mark.parametrize("path", [KWS, MOBILENET], ids=["kws", "mobilenet"])
def test_batched_performance_infos_are_each_alone(path):
    """The "tvm" costs prepared for all of a part's stripe configs at once are, field for
    field, what each (shape, stripes, mode) gets alone."""
    document, checked = _document(path), 0
    for part in document.graph.parts:
        if not isinstance(part, EthosuPart):
            continue
        configs = _stripe_configs(part, document.options)
        part.prepare_costs(configs, "tvm")
        for config in configs:
            for mode in (ROLLING, RECOMPUTE):
                alone = part._performance_info(config.shape, config.stripes, mode)
                assert repr(part.performance_info(config, mode)) == repr(alone)
                checked += 1
    assert checked > 1000


def _plain_single_plans(part, configs, ctx):
    """(memory, cycles, tensor configs, open configs, output config) of every single plan,
    one plan at a time, as the original computed them."""
    regions, cascade, plans = ctx.regions, ctx.cascade, []
    for config in configs:
        outputs = ctx.output_configs(config, part.output)
        rolling = part.performance_info(config, ROLLING)
        recompute = part.performance_info(config, RECOMPUTE)
        options = []
        for i, (sc, tensor) in enumerate(
            zip(part.input_stripe_configs(config), part.inputs, strict=True)
        ):
            choices = []
            for c in ctx.input_configs(sc, tensor):
                copy = ctx.copy_cycles(c) if c.copy_tensor else (0, 0)
                bandwidth = regions[c.copy_region].read_bandwidth
                reads = [
                    f32(
                        f32(per_cycle(info.read_bytes[i], bandwidth))
                        * ctx.efficiency(tensor, info.block_input_shape, c.copy_region)
                    )
                    for info in (rolling, recompute)
                ]
                choices.append((c, input_memory(c, cascade), *copy, *reads))
            options.append(choices)
        writes = []
        for out in outputs:
            info = rolling if out.buffer_mode == ROLLING else recompute
            bandwidth = regions[out.copy_region].write_bandwidth
            efficiency = ctx.efficiency(out.tensor, info.block_output_shape, out.copy_region)
            writes.append(f32(f32(per_cycle(info.write_bytes, bandwidth)) * efficiency))
        terms = writes + [t for choices in options for c in choices for t in c[4:]]
        exact = all(0 <= t < (1 << 22) and t == int(t) for t in terms)
        for combo in itertools.product(*reversed(options)):
            combo = combo[::-1]
            inputs = tuple(c[0] for c in combo)
            opens = tuple(c for c in inputs if c.state == INTERIOR)
            copy_total = sum(c[2] for c in combo)
            copy_initial = sum(c[3] for c in combo)
            tensor_configs = inputs
            for out, write in zip(outputs, writes, strict=True):
                tensor_configs = (*tensor_configs, out)
                rolls = out.buffer_mode == ROLLING
                info = rolling if rolls else recompute
                read_terms = [c[4] if rolls else c[5] for c in combo]
                if exact:
                    bandwidth = int(sum(read_terms)) + int(write)
                else:
                    bandwidth = _scalar_accumulate([_scalar_accumulate(read_terms), write])
                cycles = max(info.compute_cycles, bandwidth, copy_total)
                if cycles > copy_total:
                    cycles += copy_initial
                boundary = out.home_region == cascade and out.state == BOUNDARY
                memory = sum(c[1] for c in combo) + (out.tensor.size if boundary else 0)
                open_configs = (*opens, out) if out.state == INTERIOR else opens
                plans.append((memory, cycles, tensor_configs, open_configs, out))
    return plans


@needs_shared
@pytest.mark.parametrize(("path", "parts"), [(KWS, None), (MOBILENET, range(0, 103, 9))])
def test_batched_single_plans_are_the_plain_ones(path, parts):
    document = _document(path)
    ctx = PlanContext(document.graph, document.regions, document.home_map, document.options)
    chosen = document.graph.parts if parts is None else [document.graph.parts[i] for i in parts]
    for part in chosen:
        configs = _stripe_configs(part, document.options)
        singles = generate_single_plans(part, configs, ctx)
        plain = _plain_single_plans(part, configs, ctx)
        assert len(singles) == len(plain)
        assert singles.memory.tolist() == [p[0] for p in plain]
        assert singles.cycles.tolist() == [p[1] for p in plain]
        for i, (memory, cycles, tensor_configs, open_configs, out) in enumerate(plain):
            plan = singles.plan(i)
            assert (plan.memory_usage, plan.cycles) == (memory, cycles)
            assert plan.tensor_configs == tensor_configs
            assert plan.open_configs == open_configs
            assert plan.output_config is out
            assert singles.outputs[singles.output[i]] is out
            assert singles.open_inputs[singles.open_input[i]] == tuple(
                c for c in open_configs if c is not out
            )


def _plain_vela_single_plans(part, configs, ctx):
    """(memory, cycles, tensor configs, open configs, output config) of every single plan
    under the "vela" cost model, one plan at a time: the op's cost asked per plan. A lone
    convolution in one stripe overlaps its weight copies with its compute; an elementwise
    output written over an input held whole in the cascade region takes no bytes of its own,
    and one laid over the input it consumes in row order saves what `core.overlay` says."""
    cascade, plans = ctx.cascade, []
    weights = part.weight_tensor_idx
    slack = ctx.copy_slack(part) if weights >= 0 else 0.0
    fused = in_place_input(part)
    laid = overlaid_input(part)
    for config in configs:
        overlapped = part.double_buffers_whole_weights and math.prod(config.stripes) == 1
        outputs = ctx.output_configs(config, part.output)
        options = []
        for slot, (sc, tensor) in enumerate(
            zip(part.input_stripe_configs(config), part.inputs, strict=True)
        ):
            encoding = part.weight_encoding(slot)
            options.append([vela_input(ctx, c, weights >= 0, encoding) for c in
                            ctx.input_configs(sc, tensor)])  # fmt: skip
        for combo in itertools.product(*reversed(options)):
            combo = combo[::-1]
            inputs = tuple(c.config for c in combo)
            opens = tuple(c for c in inputs if c.state == INTERIOR)
            copied = weights >= 0 and inputs[weights].copy_tensor
            const_area, extra, beside = None, 0.0, 0.0
            if weights >= 0:
                const_area = cascade if copied else inputs[weights].home_region
            if copied:
                home = inputs[weights].home_region
                full = ctx.mem2mem(home, cascade, sum(c.copy_bytes[0] for c in combo))
                first = ctx.mem2mem(home, cascade, sum(c.copy_bytes[1] for c in combo))
                if overlapped:
                    beside = max(full - slack, 0.0)
                else:
                    extra = full - min(first, slack)
            areas = tuple(c.area(copied) for c in combo)
            tensor_configs = inputs
            for out in outputs:
                tensor_configs = (*tensor_configs, out)
                compute, access = ctx.vela_costs(
                    part, [config], [out.buffer_mode], out.copy_region, ((areas, const_area),)
                )
                access = access[0, 0].tolist()
                serial = sum(c.dma for c in combo if not c.config.tensor.is_constant)
                dma = sum(c.dma for c in combo if c.config.tensor.is_constant)
                npu = max(compute[0, 0] + (extra + serial), beside)
                cycles = int(max(npu, dma, *access))
                boundary = out.home_region == cascade and out.state == BOUNDARY
                memory = sum(c.memory for c in combo) + (out.tensor.size if boundary else 0)
                if fused >= 0 and boundary:
                    source = inputs[fused]
                    if source.home_region == cascade and source.state == BOUNDARY:
                        memory -= min(source.tensor.size, out.tensor.size)
                if laid >= 0 and boundary:
                    source = inputs[laid]
                    if source.home_region == cascade and source.state == BOUNDARY:
                        offset = overlay_offset(
                            config,
                            part.input_stripe_configs(config)[laid],
                            out.tensor.size,
                            source.tensor.size,
                        )
                        memory -= int(overlay_saving(offset, out.tensor.size, source.tensor.size))
                open_configs = (*opens, out) if out.state == INTERIOR else opens
                plans.append((memory, cycles, tensor_configs, open_configs, out))
    return plans


@needs_shared
@pytest.mark.parametrize(
    ("path", "parts", "two_homes"),
    [(KWS, None, False), (KWS, None, True), (MOBILENET, range(0, 103, 9), False)],
    ids=["kws", "kws-two-homes", "mobilenet"],
)
def test_vela_single_plans_are_the_plain_ones(path, parts, two_homes):
    document = _document(path, cost_model="vela")
    regions, homes = _two_homes(document) if two_homes else (document.regions, document.home_map)
    ctx = PlanContext(document.graph, regions, homes, document.options)
    chosen = document.graph.parts if parts is None else [document.graph.parts[i] for i in parts]
    _check_single_plans(ctx, chosen, document.options)


@pytest.mark.parametrize("model", ["kws_dscnn", "ic_resnet8"])
def test_vela_single_plans_are_the_plain_ones_on_the_flow(model):
    """The same from the flow, whose parts know their weights' encoding and which input an
    elementwise output may be written over (ic_resnet8's residual ADDs, the softmax's steps)."""
    path = SHARED / "models" / f"{model}.tflite"
    if not path.is_file():
        pytest.skip(f"no {path}")
    document = _flow_document(path)
    ctx = PlanContext(document.graph, document.regions, document.home_map, document.options)
    assert any(in_place_input(part) >= 0 for part in document.graph.parts)  # ADDs, softmax
    _check_single_plans(ctx, document.graph.parts, document.options)


def _check_single_plans(ctx, chosen, options):
    for part in chosen:
        configs = _stripe_configs(part, options)
        singles = generate_single_plans(part, configs, ctx)
        plain = _plain_vela_single_plans(part, configs, ctx)
        assert len(singles) == len(plain)
        assert singles.memory.tolist() == [p[0] for p in plain]
        assert singles.cycles.tolist() == [p[1] for p in plain]
        outputs, open_inputs = {}, {}
        for i, (memory, cycles, tensor_configs, open_configs, out) in enumerate(plain):
            plan = singles.plan(i)
            assert (plan.memory_usage, plan.cycles) == (memory, cycles)
            assert plan.tensor_configs == tensor_configs
            assert plan.open_configs == open_configs
            assert plan.output_config is out
            # Distinct outputs and open inputs are numbered in order of first appearance.
            assert singles.output[i] == outputs.setdefault(out, len(outputs))
            opens = tuple(c for c in open_configs if c is not out)
            assert singles.open_input[i] == open_inputs.setdefault(opens, len(open_inputs))
        assert singles.outputs == list(outputs)
        assert singles.open_inputs == list(open_inputs)


def _plain_graph_plans(ctx):
    """Closed plans per part group, merging one candidate at a time with Plan objects, as
    the original did (the single plans are the batched ones, checked above)."""
    options, cascade = ctx.options, ctx.cascade
    size = ctx.regions[cascade].size
    connecting, waiting, closed = {}, {}, {}
    for part in ctx.graph.parts:
        configs = generate_output_stripe_configs(
            part,
            options.stripe_factors,
            options.enable_striping,
            options.enable_multi_dimensional_striping,
        )
        configs.extend(connecting.get(part.output.id, ()))
        single_consumer = len(part.output.consumers) == 1
        joinable = waiting.__contains__ if single_consumer else (lambda config: False)
        singles = generate_single_plans(part, configs, ctx, joinable)
        buckets = {}
        for plan in (singles.plan(i) for i in range(len(singles))):
            if plan.output_config.state != INTERIOR:
                key = (plan.part_group, plan.open_configs)
                buckets.setdefault(key, []).append((plan.memory_usage, plan.cycles, plan, None))
                continue
            for join in waiting.get(plan.output_config, ()) if single_consumer else ():
                fits = plan.memory_usage + join.memory_usage < size
                if join.part_group.bit_count() < options.max_plan_size and fits:
                    rest = join.open_configs_without(part.output.id)
                    key = (plan.part_group | join.part_group, plan.open_configs[:-1] + rest)
                    memory = plan.memory_usage + join.memory_usage
                    entry = (memory, plan.cycles + join.cycles, plan, join)
                    buckets.setdefault(key, []).append(entry)
        by_group = {}
        for key, entries in buckets.items():
            by_group.setdefault(key[0], []).append((key[1], entries))
        for group, by_open in by_group.items():
            for open_configs, entries in by_open:
                if open_configs:
                    kept = cull_plans(entries, options.max_open_plans, options.disable_pareto_plans)
                else:
                    by_home = {}
                    for entry in entries:
                        output = (entry[2] if entry[3] is None else entry[3]).output_config
                        by_home.setdefault(output.home_region, []).append(entry)
                    kept = [
                        e
                        for home in by_home.values()
                        for e in cull_plans(
                            home, options.max_closed_plans, options.disable_pareto_plans
                        )
                    ]
                plans = [plan if join is None else plan.merge(join) for _, _, plan, join in kept]
                if not open_configs:
                    closed[group] = plans
                    continue
                for plan in plans:
                    for config in open_configs:
                        for stripe_config in config.stripe_configs:
                            if stripe_config.stripe_count > 1:
                                connecting.setdefault(config.tensor.id, {})[stripe_config] = None
                        waiting.setdefault(config, []).append(plan)
    return closed


def _described(closed):
    """Per part group, in order: each plan's costs, parts and configs."""
    return [
        (
            group,
            [
                (
                    p.memory_usage,
                    p.cycles,
                    p.part_group,
                    p.output_config.to_json(),
                    [c.to_json() for c in p.open_configs],
                    [c.to_json() for c in p.tensor_configs],
                )
                for p in plans
            ],
        )
        for group, plans in closed.items()
    ]


def _two_homes(document):
    """U65-like homes: every feature map but the graph's inputs and outputs may live in the
    cascade region or in a big slow one, so closed plans are culled per home."""
    graph = document.graph
    boundary = {t.id for t in graph.input_tensors} | {t.id for t in graph.output_tensors}
    regions = {
        **document.regions,
        "DRAM": MemoryRegion("DRAM", 1 << 30, 8, 8, 500, 250, 128),
    }
    homes = {
        t.id: ["DRAM"]
        if t.is_constant or t.id in boundary
        else [document.options.cascade_region, "DRAM"]
        for t in graph.tensors
    }
    return regions, homes


@needs_shared
@pytest.mark.parametrize(
    ("path", "options", "two_homes"),
    [
        (KWS, {}, False),
        (KWS, {"max_plan_size": 3, "max_open_plans": 3, "max_closed_plans": 5}, False),
        (KWS, {"disable_pareto_plans": True}, False),
        (SHARED / "golden" / "ic_resnet8_s1_p32k.json", {}, False),
        (KWS, {}, True),
    ],
    ids=["kws", "kws-small-limits", "kws-no-pareto", "resnet8", "kws-two-homes"],
)
def test_batched_merging_is_the_plain_merge(path, options, two_homes):
    document = _document(path, **options)
    regions, homes = _two_homes(document) if two_homes else (document.regions, document.home_map)
    plain = PlanContext(document.graph, regions, homes, document.options)
    batched = PlanContext(load_graph(path).graph, regions, homes, document.options)
    assert _described(generate_graph_plans(batched)) == _described(_plain_graph_plans(plain))


KWS_MODEL = SHARED / "models" / "kws_dscnn.tflite"


def _flow_document(model=KWS_MODEL):
    """A model (kws) from the flow (its parts know their weights), "vela" cost model,
    multi-dimensional striping."""
    from sessions import prepared_model

    from cascader.core.options import CascaderOptions
    from cascader.ethosu.graph import graph_document
    from cascader.ethosu.memory import system_memory
    from cascader.frontend.tflite_import import load_tflite

    accelerator = "ethos-u55-256"
    prepared = prepared_model(load_tflite(str(model)), accelerator)
    memory = system_memory(accelerator, "Ethos_U55_High_End_Embedded", "Shared_Sram", 1 << 20)
    options = CascaderOptions(
        enable_striping=True, enable_multi_dimensional_striping=True, cost_model="vela"
    )
    return graph_document(prepared.network.graph, memory, options)


def _plain_stripe_blocks(part, shape):
    """Each "vela" block config's (input, output) block, the output clipped axis by axis to
    the stripe rounded up to whole micro-blocks."""
    quantum, found = part.output_quantum, []
    for block in part.vela_block_configs:
        out = []
        for axis, size in enumerate(block.output_shape):
            if axis < min(len(shape), len(quantum)):
                size = min(size, -(-shape[axis] // quantum[axis]) * quantum[axis])
            elif axis < len(shape):
                size = min(size, shape[axis])
            out.append(size)
        found.append((tuple(block.input_shape), tuple(out)))
    return tuple(found)


@pytest.mark.skipif(not KWS_MODEL.is_file(), reason=f"no {KWS_MODEL}")
def test_batched_vela_costs_are_each_alone():
    """A part's "vela" block costs prepared for many stripe configs at once, and its cost
    for many (stripe config, area set) pairs at once, are what each gets alone (on a
    part that has computed nothing else; `_vela_costs`: computed, not remembered)."""
    batched, alone = _flow_document(), _flow_document()
    ctx = PlanContext(batched.graph, batched.regions, batched.home_map, batched.options)
    alone_ctx = PlanContext(alone.graph, alone.regions, alone.home_map, alone.options)
    cascade, homes, checked = ctx.cascade, batched.home_map, 0
    for part, fresh in zip(batched.graph.parts, alone.graph.parts, strict=True):
        if not isinstance(part, EthosuPart):
            continue
        configs = _stripe_configs(part, batched.options)[::4]
        modes = [(RECOMPUTE, ROLLING)[i % 2] for i in range(len(configs))]
        part.prepare_costs(configs, "vela")
        part.prepare_block_costs(configs, modes)
        for config, mode in zip(configs, modes, strict=True):
            ours, single = part.block_costs(config, mode), fresh.block_costs(config, mode)
            assert ours.compute_cycles.tolist() == single.compute_cycles.tolist()
            assert ours.read_bytes.tolist() == single.read_bytes.tolist()
            assert (ours.write_bytes, ours.block_shapes) == (
                single.write_bytes,
                single.block_shapes,
            )
            assert ours.block_shapes == _plain_stripe_blocks(part, config.shape)
            # Access costs from the part's block arrays are those of each listed block.
            region = ctx.regions[cascade]
            for slot, tensor in [(0, part.inputs[0]), (len(part.inputs), part.output)]:
                is_read = slot == 0
                side = 0 if is_read else 1
                bandwidth = region.read_bandwidth if is_read else region.write_bandwidth
                got = part.access_costs(ours, config.shape, slot, region).counted
                listed = [
                    burst_efficiency(tensor, pair[side], region, is_read) / bandwidth
                    for pair in ours.block_shapes
                ]
                assert got.tolist() == listed
        area_sets = _area_sets(part, homes, cascade)
        for out_area in sorted({cascade, *homes[part.output.id]}):
            costs = ctx._vela_costs(part, configs, modes, out_area, area_sets)
            pairs = list(zip(configs, modes, strict=True))
            checked += _assert_each_alone(costs, alone_ctx, fresh, pairs, out_area, area_sets)
    assert checked > 500


def _assert_each_alone(costs, alone_ctx, fresh, pairs, out_area, area_sets) -> int:
    """Asserts each (config, mode) x area set row of `costs` (compute, access) is what
    `alone_ctx` computes for it alone on the fresh graph's part; returns the rows checked."""
    compute, access = costs
    for t, (config, mode) in enumerate(pairs):
        for k, area_set in enumerate(area_sets):
            one = alone_ctx._vela_costs(fresh, [config], [mode], out_area, (area_set,))
            assert compute[t, k] == one[0][0, 0]
            assert access[t, k].tolist() == one[1][0, 0].tolist()
    return len(pairs) * len(area_sets)


def _area_sets(part, homes, cascade):
    """Every (input areas, scale-bias area) a plan may give the part: constants read in
    place or copied (not counted), feature maps where they may live."""
    per_slot = [
        [None, *homes[t.id]] if t.is_constant else sorted({cascade, *homes[t.id]})
        for t in part.inputs
    ]
    weights = part.weight_tensor_idx
    constants = [None] if weights < 0 else sorted({cascade, *homes[part.inputs[weights].id]})
    return tuple(itertools.product(itertools.product(*per_slot), constants))


@pytest.mark.skipif(not KWS_MODEL.is_file(), reason=f"no {KWS_MODEL}")
def test_vela_costs_a_later_run_remembers_are_those_computed_afresh():
    """A later cascader run on the graph (other options) takes the (config, mode, area set)
    costs an earlier run computed from the graph's memo, in its own order and mix with
    rows not computed yet: each is what a fresh graph computes for it alone."""
    warm, alone = _flow_document(), _flow_document()
    first = PlanContext(warm.graph, warm.regions, warm.home_map, warm.options)
    options = dataclasses.replace(warm.options, always_copy_size=0, stripe_factors=2)
    later = PlanContext(warm.graph, warm.regions, warm.home_map, options)
    alone_ctx = PlanContext(alone.graph, alone.regions, alone.home_map, alone.options)
    checked = 0
    for part, fresh in zip(warm.graph.parts, alone.graph.parts, strict=True):
        if not isinstance(part, EthosuPart):
            continue
        configs = _stripe_configs(part, warm.options)[::4]
        modes = [(RECOMPUTE, ROLLING)[i % 2] for i in range(len(configs))]
        area_sets = _area_sets(part, warm.home_map, first.cascade)
        asked = area_sets[::-1][:3]
        for out_area in sorted({first.cascade, *warm.home_map[part.output.id]}):
            first.vela_costs(part, configs[::2], modes[::2], out_area, area_sets)
            # Each config in both modes: one remembered, one not (or the other way round).
            pairs = [(config, mode) for config in configs[::-1] for mode in (ROLLING, RECOMPUTE)]
            asked_configs, asked_modes = [c for c, _ in pairs], [m for _, m in pairs]
            costs = later.vela_costs(part, asked_configs, asked_modes, out_area, asked)
            checked += _assert_each_alone(costs, alone_ctx, fresh, pairs, out_area, asked)
    assert checked > 200


@needs_shared
def test_vela_copies_each_feature_map_stripe_whole_in_series_with_the_compute():
    """The `vela` model charges a copied feature map as the schedule copies it: every stripe
    whole into the one buffer the op reads, each copy paying the home region's latency, and
    (as the evaluator does) in series with the op's compute."""
    document = _document(KWS, cost_model="vela")
    regions, homes = _two_homes(document)
    ctx = PlanContext(document.graph, regions, homes, document.options)
    dram = regions["DRAM"]
    checked = 0
    for part in document.graph.parts:
        for plan in generate_single_plans(part, _stripe_configs(part, document.options), ctx):
            copied = [c for c in plan.tensor_configs if c.copy_tensor and not c.tensor.is_constant]
            if not copied or copied[0].home_region != "DRAM":
                continue
            config = copied[0]
            expected = 0.0
            for stripe_config in config.stripe_configs:
                for shape, count in count_stripes(stripe_config):
                    moved = math.prod(shape) * config.tensor.dtype_bytes
                    moved *= config.tensor.compression_ratio
                    slower = max(
                        moved / dram.read_bandwidth,
                        moved / regions[config.copy_region].write_bandwidth,
                    )
                    expected += count * (dram.read_latency + slower)
            assert ctx.vela_copy(config) == pytest.approx(expected)
            assert plan.cycles >= math.floor(sum(ctx.vela_copy(c) for c in copied))
            checked += 1
    assert checked
