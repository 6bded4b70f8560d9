"""The opt-in "vela" cost model: it leaves the original ("tvm") results untouched, and it
costs transfers, copies and compute the way Vela's performance model (npu_performance) does,
checked against Vela itself on real graphs and systems."""

import os
from dataclasses import replace
from pathlib import Path

import pytest
from ethosu.vela.npu_performance import (
    _estimate_memory_transfer_efficiency,
    measure_cycle_cost,
)
from ethosu.vela.shape4d import Shape4D
from ethosu.vela.tensor import MemArea, TensorFormat

from cascader.core import cascade, load_graph
from cascader.core.options import CascaderOptions
from cascader.core.part import BufferMode
from cascader.core.plan_generation import PlanContext, copy_cycles_hint, vela_efficiency
from cascader.core.stripe_generation import generate_output_stripe_configs
from cascader.core.tensor import Tensor
from cascader.core.tensor_config import TensorConfigState

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
    assert vela_efficiency(tensor, ours, region, is_read) == pytest.approx(expected)


@pytest.mark.skipif(not MODEL.is_file(), reason=f"no {MODEL}")
def test_compute_cycles_follow_vela_for_every_block_config():
    """A real network's conv2d and depthwise parts, computed whole: the "vela" cost of every
    block config is Vela's measure_cycle_cost for that block within 5% (Vela also charges a
    per-block command overhead and bias fetch the block configs do not carry)."""
    from cascader.ethosu.device import get_device
    from cascader.ethosu.part import EthosuPart
    from cascader.ethosu.perf_query import performance_query
    from cascader.flow.cascader_graph import npu_op_description
    from cascader.flow.frontend import load_tflite
    from cascader.flow.pipeline import front_half

    accelerator = "ethos-u55-256"
    front = front_half(load_tflite(MODEL), accelerator)
    device = get_device(accelerator)
    checked = 0
    for part in front.network.graph.parts:
        if not isinstance(part, EthosuPart) or part.op not in ("conv2d", "depthwise_conv2d"):
            continue
        desc = npu_op_description(front.network.ops[part.id])
        whole = generate_output_stripe_configs(part, 1, False, False)[0]
        costs = part.block_costs(whole, BufferMode.RECOMPUTE)
        for index, block in enumerate(part.block_configs):
            out = block.output_shape
            hwd = (out[1], out[3], out[2] * 16) if len(out) == 5 else (out[1], out[2], out[3])
            query = performance_query(desc, device.vela_block_config(desc, hwd))
            vela = measure_cycle_cost(device.arch, desc.vela_op, desc.faf_op, query).op_cycles
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
