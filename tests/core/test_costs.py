"""Buffer sizes, Pareto culling, plan merging and the Ethos-U part cost, by hand."""

from cascader.core.floats import f32
from cascader.core.pareto import cull_plans, pareto_cull, pareto_order, thin_indices
from cascader.core.part import BufferMode
from cascader.core.plan import Plan
from cascader.core.propagator import Propagator
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor import Tensor
from cascader.core.tensor_config import TensorConfigState, TensorConfigTable
from cascader.ethosu.block_config import BlockConfig
from cascader.ethosu.part import EthosuPart

BOUNDARY, INTERIOR = TensorConfigState.BOUNDARY, TensorConfigState.INTERIOR
RECOMPUTE, ROLLING = BufferMode.RECOMPUTE, BufferMode.ROLLING
# 9-row stripes over a 16x16x8 tensor, two stripes along rows (rows outermost).
ROWS = StripeConfig(
    (1, 9, 17, 8), (1, 17, 17, 8), (1, 8, 16, 0), (4, 1, 2, 0), (1, 2, 1, 1), (0, -1, -1, 0)
)


def test_buffer_sizes():
    table = TensorConfigTable()
    tensor = Tensor(0, (1, 16, 16, 8))
    recompute = table.get(tensor, "SRAM", INTERIOR, RECOMPUTE, (ROWS,), False, "SRAM")
    rolling = table.get(tensor, "SRAM", INTERIOR, ROLLING, (ROWS,), False, "SRAM")
    assert recompute.buffer_size == 9 * 17 * 8  # one whole stripe
    assert rolling.buffer_size == 9 * 16 * 8  # stripe rows x full tensor width and depth
    # Unstriped: the rolling axis falls back to axis 0.
    whole = StripeConfig(
        (1, 16, 16, 8), (1, 16, 16, 8), (1, 16, 16, 8), (1, 2, 3, 4), (1,) * 4, (0,) * 4
    )
    assert table.get(tensor, "SRAM", INTERIOR, ROLLING, (whole,), False, "SRAM").buffer_size == 2048
    # int32 with a compression ratio truncates like the original's float maths.
    packed = Tensor(1, (1, 16, 16, 8), "int32", compression_ratio=0.3)
    config = table.get(packed, "SRAM", INTERIOR, RECOMPUTE, (ROWS,), False, "SRAM")
    assert config.buffer_size == int(f32(f32(9 * 17 * 8 * 4) * f32(0.3)))
    assert table.get(tensor, "SRAM", INTERIOR, ROLLING, (ROWS,), False, "SRAM") is rolling


def test_pareto_front_on_known_points():
    memory = [10, 5, 7, 10, 8, 5, 7]
    cycles = [5, 10, 7, 5, 8, 12, 7]
    # (8,8) and (5,12) are dominated; duplicates keep the first.
    assert pareto_order(memory, cycles) == [1, 2, 0]
    assert pareto_cull(list("abcdefg"), memory, cycles, 2, False) == ["b", "a"]
    assert pareto_cull(list("abcdefg"), memory, cycles, 3, True) == ["a", "d", "g"]


def test_thinning_keeps_first_and_last_with_single_precision_steps():
    assert thin_indices(10, 4) == [0, 3, 6, 9]
    assert thin_indices(5, 8) == [0, 1, 2, 3, 4]
    assert thin_indices(5, 1) == [0]
    assert thin_indices(5, 0) == []


def test_small_plan_groups_keep_dominated_plans():
    entries = [(10, 10), (5, 5), (20, 20)]
    assert cull_plans(entries, 3, False) == entries
    assert cull_plans(entries, 2, False) == [(5, 5)]


def test_plan_merge():
    table = TensorConfigTable()
    source, middle, result = Tensor(0, (1, 8)), Tensor(1, (1, 8)), Tensor(2, (1, 8))
    stripes = (StripeConfig((1, 4), (1, 8), (1, 4), (0, 1), (1, 2), (0, 0)),)
    src = table.get(source, "SRAM", BOUNDARY, RECOMPUTE, stripes, False, "SRAM")
    mid = table.get(middle, "SRAM", INTERIOR, ROLLING, stripes, False, "SRAM")
    out = table.get(result, "SRAM", BOUNDARY, RECOMPUTE, stripes, False, "SRAM")
    producer = Plan((src, mid), (mid,), mid, 0b10, "SRAM", 10, 5)
    consumer = Plan((mid, out), (mid,), out, 0b01, "SRAM", 20, 7)
    merged = producer.merge(consumer)
    assert merged.is_closed
    assert merged.part_group == 0b11 and merged.part_ids == [0, 1]
    assert (merged.memory_usage, merged.cycles) == (30, 12)
    assert merged.output_config is out
    assert merged.tensor_configs == (src, mid, mid, out)
    assert merged.boundary_configs == (src, out)


def _pointwise_part(blocks):
    ifm, weights, ofm = (
        Tensor(0, (1, 8, 8, 16)),
        Tensor(1, (16, 1, 1, 16), is_constant=True),
        Tensor(2, (1, 8, 8, 16)),
    )
    ifm_prop = Propagator(
        [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 16], [0, 0, 0, 0, 1]],
        [0, 0, 0, 0],
    )
    weight_prop = Propagator(
        [[0, 0, 0, 1, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 16], [0, 0, 0, 0, 1]],
        [0, 0, 0, 0],
    )
    return EthosuPart(0, [ifm, weights], ofm, [ifm_prop, weight_prop], (1, 2, 2, 8), 1, blocks, 1)


def test_ethosu_cost_picks_the_cheapest_block_and_counts_blocks():
    small = BlockConfig((1, 2, 2, 16), (1, 2, 2, 8), 10, 4)
    big = BlockConfig((1, 4, 8, 16), (1, 4, 8, 16), 100, 40)
    part = _pointwise_part([small, big])
    whole = StripeConfig(
        (1, 8, 8, 16), (1, 8, 8, 16), (1, 8, 8, 16), (1, 2, 3, 4), (1,) * 4, (0,) * 4
    )
    # Small blocks: 32 ifm blocks of 64 bytes, weights 128 bytes per block-depth, re-read for
    # each of the 16 spatial blocks. Big blocks: 2 ifm blocks of 512 bytes, weights 256 x 2.
    assert part.block_choice(whole.shape) == (1, (1024, 512))
    info = part.performance_info(whole, RECOMPUTE)
    assert info.block_output_shape == (1, 4, 8, 16)
    assert info.read_bytes == (1024, 512)
    assert info.write_bytes == 1024
    # Two blocks: compute-bound, so 2 x compute cycles plus one output drain.
    assert info.compute_cycles == 2 * 100 + 40
    # A 2-row stripe, 4 stripes: the big block reads 256 + 256 bytes per 256 outputs and the
    # stripe fits in two of its input blocks (cost halved: 1.0); the small one costs 6.0.
    rows = StripeConfig(
        (1, 2, 8, 16), (1, 8, 8, 16), (1, 2, 8, 16), (2, 1, 3, 4), (1, 4, 1, 1), (0,) * 4
    )
    assert part.block_choice(rows.shape) == (1, (256, 256))
    recompute = part.performance_info(rows, RECOMPUTE)
    # Per stripe half a block of rows, times 4 stripes: 2 blocks either way.
    assert recompute.compute_cycles == 2 * 100 + 40
    assert recompute.read_bytes == (1024, 1024)
    assert part.performance_info(rows, ROLLING).compute_cycles == 2 * 100 + 40
    # With only the small block available: 4 blocks per stripe row, 2 channel blocks.
    small_only = _pointwise_part([small])
    assert small_only.performance_info(rows, RECOMPUTE).compute_cycles == 32 * 10 + 4
