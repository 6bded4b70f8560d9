"""The opt-in "vela" cost model: it leaves the original ("tvm") results untouched, and it
costs transfers, copies and compute the way Vela's performance model (npu_performance) does,
checked against Vela itself on real graphs and systems."""

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ethosu.vela.npu_performance import (
    _estimate_memory_transfer_efficiency,
    measure_cycle_cost,
)
from ethosu.vela.shape4d import Shape4D
from ethosu.vela.tensor import MemArea, TensorFormat

from cascader.core import cascade
from cascader.core.options import CascaderOptions
from cascader.core.part import BufferMode
from cascader.core.plan_context import PlanContext, copy_cycles_hint
from cascader.core.stripe_generation import generate_output_stripe_configs
from cascader.core.tensor import Tensor
from cascader.core.tensor_config import TensorConfigState
from cascader.ethosu.burst import burst_efficiency
from cascader.ethosu.graph_json import load_graph

SHARED = Path(
    os.environ.get("CASCADER_SHARED", Path(__file__).resolve().parents[2].parent / "shared")
)
GOLDEN = SHARED / "golden" / "kws_dscnn_s1_p64k.json"
MODEL = SHARED / "models" / "kws_dscnn.tflite"
needs_shared = pytest.mark.skipif(not GOLDEN.is_file(), reason=f"no {GOLDEN}")


def test_tvm_is_the_default_and_unknown_models_are_refused():
    assert CascaderOptions().cost_model == "tvm"
    options = CascaderOptions(cost_model="vela")
    assert CascaderOptions.from_json(options.to_json()) == options
    with pytest.raises(ValueError, match="cost_model"):
        CascaderOptions(cost_model="exact")


def _run(document, cost_model: str):
    options = replace(document.options, cost_model=cost_model)
    return cascade(document.graph, document.regions, document.home_map, options)


def _costs(result) -> list[tuple[int, int]]:
    return [(p.memory_usage, p.cycles) for p in result.proposals]


@needs_shared
def test_vela_run_leaves_the_tvm_results_of_the_same_graph_exact():
    """Both models memoise costs on the same part objects; a "vela" run first must not leak
    into the golden "tvm" results."""
    document = load_graph(GOLDEN)
    expected = [(p["memory_usage"], p["cycles"]) for p in document.extras["expected"]["proposals"]]
    vela = _run(document, "vela")
    tvm = _run(document, "tvm")
    assert _costs(tvm) == expected
    assert _costs(vela) != expected
    memories = [m for m, _ in _costs(vela)]
    cycles = [c for _, c in _costs(vela)]
    assert memories == sorted(memories) and cycles == sorted(cycles, reverse=True)
    assert all(c > 0 for c in cycles)


@needs_shared
def test_vela_copy_divides_by_bandwidth_where_the_original_multiplied():
    """Copying a weight tensor from flash to SRAM: the original's hint multiplies the bytes
    by the bandwidths (bytes per cycle); the "vela" model takes Vela's mem2mem time, bytes
    over the slower side's bandwidth."""
    document = load_graph(GOLDEN)
    options = replace(document.options, cost_model="vela")
    ctx = PlanContext(document.graph, document.regions, document.home_map, options)
    part = next(p for p in document.graph.parts if any(t.is_constant for t in p.inputs))
    weights = next(t for t in part.inputs if t.is_constant)
    home = document.home_map[weights.id][0]
    config = _copied_config(ctx, part, weights)
    total = ctx.vela_copy(config)
    source, target = document.regions[home], document.regions[config.copy_region]
    moved = weights.size
    assert total == pytest.approx(
        max(moved / source.read_bandwidth, moved / target.write_bandwidth)
    )
    original, _ = copy_cycles_hint(config, document.regions)
    assert original >= moved * target.write_bandwidth


def _copied_config(ctx: PlanContext, part, weights: Tensor):
    """The weights' BOUNDARY config copied whole into the cascade region."""
    stripe = generate_output_stripe_configs(part, 1, False, False)[0]
    wanted = part.input_stripe_configs(stripe)[part.inputs.index(weights)]
    return next(
        c
        for c in ctx.input_configs(wanted, weights)
        if c.copy_tensor and c.state == TensorConfigState.BOUNDARY
    )


@pytest.mark.parametrize("area", [MemArea.Sram, MemArea.Dram])
@pytest.mark.parametrize("is_read", [True, False])
@pytest.mark.parametrize(
    ("tensor_shape", "block"),
    [
        ((1, 56, 56, 24), (1, 8, 16, 8)),
        ((1, 56, 56, 24), (1, 4, 8, 24)),
        ((1, 56, 56, 64), (1, 2, 32, 64)),
        ((1, 56, 56, 1), (1, 4, 16, 1)),
        ((1, 56, 4, 56, 16), (1, 6, 2, 20, 16)),
        ((1, 56, 4, 56, 16), (1, 16, 1, 4, 16)),
    ],
)
def test_burst_efficiency_is_vela_s(area, is_read, tensor_shape, block):
    """The multiplier on a feature map's bytes equals Vela's own for the same block, format
    and memory (its IFM blocks are whole 8-deep micro-blocks, which a clipped block config
    rounds back to)."""
    from cascader.ethosu.memory import system_memory

    memory = system_memory("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", 1 << 20)
    region = memory.regions["sram" if area == MemArea.Sram else "dram"]
    arch = memory.arch
    tensor = Tensor(0, tensor_shape)
    nhcwb16 = len(tensor_shape) == 5
    fmt = TensorFormat.NHCWB16 if nhcwb16 else TensorFormat.NHWC
    if nhcwb16:
        n, h, c16, w, _ = tensor_shape
        shape = Shape4D(n, h, w, c16 * 16)
        vela_block = Shape4D(1, block[1], block[3], block[2] * 16)
        ours = block if not is_read else (1, block[1], block[3], block[2] * 16)
    else:
        shape = Shape4D(*tensor_shape)
        depth = -(-block[3] // 8) * 8 if is_read else block[3]
        vela_block = Shape4D(1, block[1], block[2], depth)
        ours = block
    expected = _estimate_memory_transfer_efficiency(
        arch, is_read, area, fmt, 8, vela_block, shape, 1.0
    )
    assert burst_efficiency(tensor, ours, region, is_read) == pytest.approx(expected)


@pytest.mark.skipif(not MODEL.is_file(), reason=f"no {MODEL}")
def test_compute_cycles_follow_vela_for_every_block_config():
    """A real network's conv2d and depthwise parts, computed whole: the "vela" cost of every
    block config is Vela's measure_cycle_cost for that block within 5% (Vela also charges a
    per-block command overhead and bias fetch the block configs do not carry)."""
    from cascader.ethosu.device import get_device
    from cascader.ethosu.perf_query import performance_query

    arch = get_device("ethos-u55-256").arch
    checked = 0
    for _, _, costs, desc, blocks in _conv_parts("ethos-u55-256"):
        for index, block in enumerate(blocks):
            query = performance_query(desc, block)
            vela = measure_cycle_cost(arch, desc.vela_op, desc.faf_op, query).op_cycles
            assert costs.compute_cycles[index] == pytest.approx(vela, rel=0.05)
            checked += 1
    assert checked > 20


@needs_shared
def test_rolling_saves_compute_only_when_striped_along_the_height():
    """A ROLLING output striped over its height computes each row once; striped over any
    other axis the flow's schedule recomputes the overlap, so it costs what RECOMPUTE does.
    Overlapping stripes are what a consumer's stripes need of its producer's output."""
    document = load_graph(GOLDEN)
    producers = {p.output.id: p for p in document.graph.parts}
    saved = 0
    for consumer in document.graph.parts:
        for config in generate_output_stripe_configs(consumer, 5, True, False):
            needed = consumer.input_stripe_configs(config)
            for tensor, wanted in zip(consumer.inputs, needed, strict=True):
                producer = producers.get(tensor.id)
                if producer is None or producer.kind != "ethosu" or wanted.stripe_count == 1:
                    continue
                rolling = producer.block_costs(wanted, BufferMode.ROLLING).compute_cycles
                recompute = producer.block_costs(wanted, BufferMode.RECOMPUTE).compute_cycles
                if any(n > 1 for axis, n in enumerate(wanted.stripes) if axis != 1):
                    assert (rolling == recompute).all()
                else:
                    assert (rolling <= recompute).all()
                    saved += int((rolling < recompute).any())
    assert saved > 0


U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")


def _whole(part):
    return generate_output_stripe_configs(part, 1, False, False)[0]


def _conv_parts(accelerator: str):
    """kws's conv2d and depthwise parts on `accelerator`, each computed whole: the part, its
    whole-output stripe config, its "vela" block costs, its op description and, for each of
    its "vela" block configs in order, Vela's block config of the same output block."""
    from sessions import prepared_model

    from cascader.ethosu.device import get_device
    from cascader.ethosu.graph import npu_op_description
    from cascader.ethosu.part import EthosuPart
    from cascader.frontend.tflite_import import load_tflite

    prepared = prepared_model(load_tflite(MODEL), accelerator)
    device = get_device(accelerator)
    for part in prepared.network.graph.parts:
        if not isinstance(part, EthosuPart) or part.op not in ("conv2d", "depthwise_conv2d"):
            continue
        desc = npu_op_description(prepared.network.ops[part.id])
        whole = _whole(part)
        blocks = []
        for block in part.vela_block_configs:
            out = block.output_shape
            hwd = (out[1], out[3], out[2] * 16) if len(out) == 5 else (out[1], out[2], out[3])
            blocks.append(device.vela_block_config(desc, hwd))
        yield part, whole, part.block_costs(whole, BufferMode.RECOMPUTE), desc, blocks


@pytest.mark.skipif(not MODEL.is_file(), reason=f"no {MODEL}")
@pytest.mark.parametrize(
    ("ifm_area", "ofm_area", "const_area"),
    [("sram", "sram", "sram"), ("dram", "dram", "dram"), ("sram", "dram", "dram")],
)
def test_command_overhead_is_vela_s_in_every_memory(ifm_area, ofm_area, const_area):
    """Where the feature maps and scale-biases live changes an op's compute cycles: each
    block waits for its IFM and OFM transfers and its scale-bias fetch latency. Every
    conv2d and depthwise part of a real network, computed whole, under every block config:
    Vela's measure_cycle_cost with those areas, within 5%."""
    from cascader.ethosu.memory import system_memory
    from cascader.ethosu.perf_query import performance_query

    memory = system_memory(*U65, 1 << 20)
    ifm_region, ofm_region = memory.regions[ifm_area], memory.regions[ofm_area]
    checked = 0
    for part, whole, costs, desc, blocks in _conv_parts(U65[0]):
        ifm_read = ifm_region.read_bandwidth
        ifm_per_byte = [
            burst_efficiency(part.inputs[0], shapes[0], ifm_region, True) / ifm_read
            for shapes in costs.block_shapes
        ]
        ofm_per_byte = [
            burst_efficiency(part.output, shapes[1], ofm_region, False) / ofm_region.write_bandwidth
            for shapes in costs.block_shapes
        ]
        ifm_cycles = ifm_region.read_latency + part.ifm_block_bytes(whole) * ifm_per_byte
        ours = part.command_bound(
            [whole],
            [BufferMode.RECOMPUTE],
            ifm_cycles[None, None],  # one config, one plan
            np.array(ofm_per_byte)[None],
            ofm_region.write_latency,
            np.array([memory.regions[const_area].read_latency]),
        ).counted[0, 0]
        for index, block in enumerate(blocks):
            query = performance_query(desc, block, ifm_area, ofm_area, None, const_area)
            vela = measure_cycle_cost(memory.arch, desc.vela_op, desc.faf_op, query).op_cycles
            assert ours[index] == pytest.approx(vela, rel=0.05)
            checked += 1
    assert checked > 100


@pytest.mark.skipif(not MODEL.is_file(), reason=f"no {MODEL}")
def test_a_convolution_reads_its_ifm_once_per_ofm_block_as_vela_counts():
    """Vela counts a convolution's IFM once per OFM block and sub-kernel, depth blocks
    included (each block runs the whole IFM depth), a whole IFM block even at an edge; a
    depthwise block fetches the IFM depth once per spatial block. Every block config of
    kws's conv2d and depthwise parts, computed whole: the IFM bytes read are Vela's
    measure_element_access within 10%."""
    from ethosu.vela.npu_performance import measure_element_access

    from cascader.ethosu.device import get_device
    from cascader.ethosu.perf_query import performance_query

    arch = get_device("ethos-u55-256").arch
    checked = 0
    for _, _, costs, desc, blocks in _conv_parts("ethos-u55-256"):
        for index, block in enumerate(blocks):
            vela = measure_element_access(arch, performance_query(desc, block)).ifm_read[0]
            assert costs.read_bytes[index, 0] == pytest.approx(vela, rel=0.1)
            checked += 1
    assert checked > 100


def _single_plans(document, part):
    """The "vela" single plans of `part` computed whole, and the context that made them
    (every constant may also be read in place, however small)."""
    from cascader.core.single_plans_vela import vela_single_plans

    options = replace(document.options, cost_model="vela", always_copy_size=0)
    ctx = PlanContext(document.graph, document.regions, document.home_map, options)
    return ctx, vela_single_plans(part, [_whole(part)], ctx, None)


@needs_shared
def test_weight_copies_wait_for_the_compute_and_a_scale_bias_copy_alone_reads_in_place():
    """The schedule copies an op's weights into one buffer, so the copy adds to the compute
    (less what hides under the previous op); the evaluator sees a scale-bias copied without
    its weights as read where it is homed, so copying it alone buys nothing."""
    document = load_graph(GOLDEN)
    checked = 0
    for part in document.graph.parts:
        weights = part.weight_tensor_idx
        if weights < 0:
            continue
        ctx, plans = _single_plans(document, part)
        bias = next(i for i, t in enumerate(part.inputs) if t.is_constant and i != weights)
        by_copies: dict[tuple[bool, bool], list[int]] = {}
        for plan in plans:
            configs = plan.tensor_configs
            if configs[0].state != TensorConfigState.BOUNDARY or plan.output_config.state != (
                TensorConfigState.BOUNDARY
            ):
                continue
            key = (configs[weights].copy_tensor, configs[bias].copy_tensor)
            by_copies.setdefault(key, []).append(plan.cycles)
        if (False, True) not in by_copies or (True, True) not in by_copies:
            continue
        assert sorted(by_copies[False, True]) == sorted(by_copies[False, False])
        home = document.home_map[part.inputs[weights].id][0]
        copied = part.inputs[weights].size + part.inputs[bias].size
        serial = ctx.mem2mem(home, ctx.cascade, copied) - ctx.copy_slack(part)
        assert min(by_copies[True, True]) >= serial
        checked += 1
    assert checked > 3


@pytest.mark.skipif(not MODEL.is_file(), reason=f"no {MODEL}")
def test_vela_cost_ranks_proposals_as_the_evaluator_does():
    """Spearman's rho between the cascader's "vela" cycles of kws's distinct proposals (64
    KiB to 2 MiB pools, striping on and off, Ethos-U55-256) and the evaluator's cycles of
    their stripe schedules is at least 0.9."""
    from scipy.stats import spearmanr
    from sessions import prepared_model

    from cascader.ethosu.codegen import generate
    from cascader.ethosu.memory import system_memory
    from cascader.ethosu.perf import evaluate
    from cascader.ethosu.weights import encoded_size
    from cascader.frontend.tflite_import import load_tflite
    from cascader.schedule.policies import proposal_schedule

    system = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    prepared = prepared_model(load_tflite(MODEL), system[0])
    found = {}
    for pool in (64 << 10, 256 << 10, 2 << 20):
        memory = system_memory(*system, pool)
        for striping in (True, False):
            options = CascaderOptions(cascade_region=memory.cascade_area,
                                      enable_striping=striping, cost_model="vela")  # fmt: skip
            for proposal in prepared.scheduler.proposals(memory, options, pool).proposals:
                found.setdefault((proposal.memory_usage, proposal.cycles), proposal)
    memory = system_memory(*system, 2 << 20)
    sizes = encoded_size(system[0], prepared.network.ops)
    evaluated = []
    for proposal in found.values():
        schedule = proposal_schedule(prepared.network, proposal, memory, sizes, check=False)
        compiled = generate(schedule, system[0], command_streams=False)
        evaluated.append(evaluate(compiled.scheduled_ops, memory).total_cycles)
    assert len(found) >= 5
    assert spearmanr([p.cycles for p in found.values()], evaluated).statistic >= 0.9
