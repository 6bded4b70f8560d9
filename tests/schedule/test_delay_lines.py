"""Skips inside cascades: under the "vela" cost model a tensor several parts read (a residual
block's input, read by its first convolution and by its ADD) may stay in a plan that holds
all its readers, as one buffer of the rows between the readers (a delay line), instead of
whole between plans; and the vela model counts interior buffers as the schedule holds them.
The schedules are proven on the simulator: command streams equal the reference, over
samples whose outputs vary."""

from __future__ import annotations

import contextlib
import io

import pytest
from proofs import proven, small_options
from sessions import session

from cascader.core.overlay import overlaid_input, overlay_offset, overlay_saving
from cascader.core.part import BufferMode, in_place_input
from cascader.core.plan_context import PlanContext
from cascader.core.plan_generation import covers, generate_graph_plans
from cascader.core.single_plans_vela import held_bytes, rolled_stripe
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor import Tensor
from cascader.core.tensor_config import TensorConfigState, TensorConfigTable
from cascader.estimate import PointConfig
from cascader.ethosu.graph import graph_document
from cascader.ethosu.memory import system_memory
from cascader.testing.tflite_builder import ModelBuilder

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
INTERIOR = TensorConfigState.INTERIOR
SAMPLES = 8
POOL = 16384  # below every schedule of the network: each kind runs its smallest


def _residual_net() -> bytes:
    """Two bottleneck blocks whose 64-channel input is read by the block's 1x1 and by its
    ADD, then a strided convolution to a small output: the skips are the largest tensors."""
    b = ModelBuilder(0, 2, name="residual")
    x = b.conv2d(b.input((1, 24, 24, 8)), 64, kernel=3, activation="RELU")
    for _ in range(2):
        y = b.conv2d(x, 16, kernel=1, activation="RELU")
        y = b.conv2d(y, 16, kernel=3, activation="RELU")
        y = b.conv2d(y, 64, kernel=1, activation="NONE")
        x = b.add(x, y, activation="RELU")
    b.output(b.conv2d(x, 16, kernel=3, stride=2, activation="RELU"))
    return b.build()


def _delay_lines(found, config: PointConfig) -> int:
    """How many tensors read by several parts the chosen proposal keeps inside a plan."""
    with contextlib.redirect_stdout(io.StringIO()):
        point = found.schedule(config)
    graph = found.prepared.network.graph
    held = set()
    for plan in point.cascade.chosen.plans:
        inside = {p.output.id for p in graph.parts if plan.part_group >> p.id & 1}
        held |= {
            c.tensor.id
            for c in plan.tensor_configs
            if c.state == INTERIOR and c.tensor.id in inside and len(c.tensor.consumers) > 1
        }
    return len(held)


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("two_d", [False, True], ids=["rows", "tiles"])
def test_skips_held_as_delay_lines_are_bit_exact(system: tuple, two_d: bool) -> None:
    found = session(_residual_net(), *system)
    config = PointConfig(POOL, small_options("vela", two_d), proposal_region_bytes=1 << 20)
    assert _delay_lines(found, config) >= 1
    with contextlib.redirect_stdout(io.StringIO()):
        estimate = found.score(config)
    skip = 24 * 24 * 64
    assert estimate.sram_used_bytes < 2 * skip  # no block holds its input and output whole
    proven(found, config, SAMPLES)


def test_the_original_model_keeps_skips_whole() -> None:
    """The "tvm" cost model is TVM v0.18's algorithm: a tensor two parts read is never a
    plan's interior (its goldens stay bit-exact)."""
    found = session(_residual_net(), *U55)
    config = PointConfig(POOL, small_options("tvm", False), proposal_region_bytes=1 << 20)
    assert _delay_lines(found, config) == 0


def _single_plans(plan) -> list:
    """The parts' single plans a plan was merged from."""
    return [plan] if plan.sources is None else [s for p in plan.sources for s in _single_plans(p)]


def test_a_plan_holding_two_readers_of_a_whole_skip_counts_it_once() -> None:
    """A plan holding a residual block's input whole with both its readers (the 1x1 and the
    ADD) counts it once, where its parts' single plans count it per reader."""
    found = session(_residual_net(), *U55)
    graph = found.prepared.network.graph
    memory = system_memory(*U55, 1 << 20, None)
    document = graph_document(graph, memory, small_options("vela", False))
    plans = generate_graph_plans(
        PlanContext(graph, document.regions, document.home_map, document.options)
    )
    cascade = document.options.cascade_region
    parts = {p.id: p for p in graph.parts}
    checked = 0
    for plan in (p for closed in plans.values() for p in closed):
        singles = _single_plans(plan)
        counted = {}  # tensor id -> (size, how many single plans hold it whole as an input)
        for single in singles:
            (part_id,) = single.part_ids
            for config in single.tensor_configs[: len(parts[part_id].inputs)]:
                if config.state.name == "BOUNDARY" and config.home_region == cascade:
                    size, count = counted.get(config.tensor.id, (config.tensor.size, 0))
                    counted[config.tensor.id] = (size, count + 1)
        twice = sum(size * (count - 1) for size, count in counted.values() if count > 1)
        laid = _laid_saving(plan, singles, parts, cascade)
        assert plan.memory_usage == sum(s.memory_usage for s in singles) - twice - laid
        checked += twice > 0
    assert checked


def _laid_saving(plan, singles: list, parts: dict, cascade: str) -> int:
    """What a merged plan saves by laying its whole output over a whole input of one of its
    parts (`core.overlay`), as plan generation counts it: once, at the first merge that
    can, unless the output's own part lays it already (its single plan counts that)."""
    out = plan.output_config
    if len(singles) == 1 or out.state.name != "BOUNDARY" or out.home_region != cascade:
        return 0
    if any(in_place_input(p) >= 0 for p in out.tensor.producers):
        return 0  # the output shares its input's buffer
    *upstream, producer = singles
    own = overlaid_input(parts[producer.part_ids[0]])
    if own >= 0 and producer.tensor_configs[own].state.name == "BOUNDARY":
        return 0
    for single in reversed(upstream):
        part = parts[single.part_ids[0]]
        slot = overlaid_input(part)
        config = single.tensor_configs[slot] if slot >= 0 else None
        if config is None or config.state.name != "BOUNDARY" or config.home_region != cascade:
            continue
        size = config.tensor.size
        offset = overlay_offset(
            out.stripe_configs[0], config.stripe_configs[0], out.tensor.size, size
        )
        saved = int(overlay_saving(offset, out.tensor.size, size))
        if saved:
            return saved
    return 0


def _config(table, tensor, mode, shape, offset, strides, order, stripes):
    stripe = StripeConfig(shape, tensor.shape, strides, order, stripes, offset)
    return table.get(tensor, "sram", INTERIOR, mode, (stripe,), False, "sram")


def test_a_buffer_covers_the_rows_every_reader_reads() -> None:
    tensor = Tensor(0, (1, 24, 24, 64), "int8", False, 1.0)
    table = TensorConfigTable()
    rolling = BufferMode.ROLLING
    grid = ((0.0, 2.0, 24.0, 64.0), (0, 1, 2, 3), (1, 12, 1, 1))
    # a 1x1 before a 3x3 reads two rows more, one above; the ADD reads the output's rows
    ahead = _config(table, tensor, rolling, (1, 4, 26, 64), (0, -1, -1, 0), *grid)
    behind = _config(table, tensor, rolling, (1, 2, 24, 64), (0, 0, 0, 0), *grid)
    assert covers(ahead, behind) and not covers(behind, ahead)
    # an axis of one stripe: its stride and loop order do not matter
    other = ((0.0, 2.0, 0.0, 0.0), (0, 1, 0, 0), (1, 12, 1, 1))
    assert covers(ahead, _config(table, tensor, rolling, (1, 2, 24, 64), (0, 0, 0, 0), *other))
    recompute = _config(table, tensor, BufferMode.RECOMPUTE, (1, 2, 24, 64), (0, 0, 0, 0), *grid)
    assert not covers(ahead, recompute)  # one buffer has one mode
    shifted = ((0.0, 3.0, 24.0, 64.0), (0, 1, 2, 3), (1, 12, 1, 1))
    other_step = _config(table, tensor, rolling, (1, 2, 24, 64), (0, 0, 0, 0), *shifted)
    assert not covers(ahead, other_step)


def test_interior_buffers_as_the_schedule_holds_them() -> None:
    """A rolling consumer reads its new rows only, and no buffer holds a halo past the
    tensor's edge."""
    tensor = Tensor(0, (1, 24, 24, 64), "int8", False, 1.0)
    table = TensorConfigTable()
    grid = ((0.0, 2.0, 24.0, 64.0), (0, 1, 2, 3), (1, 12, 1, 1))
    stripe = StripeConfig((1, 6, 26, 64), tensor.shape, *grid, (0, -2, -1, 0))
    new_rows = rolled_stripe(stripe)
    assert new_rows.shape == (1, 2, 26, 64) and new_rows.offset == (0, 2, -1, 0)
    assert rolled_stripe(new_rows) is new_rows  # nothing to trim
    rolling = table.get(tensor, "sram", INTERIOR, BufferMode.ROLLING, (stripe,), False, "sram")
    assert held_bytes(rolling, stripe) == 6 * 24 * 64  # the halo columns are padding
    assert held_bytes(rolling, new_rows) == 2 * 24 * 64
    recompute = table.get(tensor, "sram", INTERIOR, BufferMode.RECOMPUTE, (stripe,), False, "sram")
    assert held_bytes(recompute, stripe) == 6 * 24 * 64
    assert rolling.buffer_size == 6 * 24 * 64 and recompute.buffer_size == 6 * 26 * 64
