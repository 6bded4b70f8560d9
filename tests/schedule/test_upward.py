"""Plans laid upward (`core.plan.Plan.laid_upward`): a single plan may run its row stripes
last rows first with its output laid above the input it consumes, so that a chain of laid
layers turns back up instead of drifting ever lower. The cascader turns a plan where the
chain then takes fewer bytes, the builder runs its stripes in reverse, the allocation lays
the pair from the steps; the schedules are proven on the simulator, bit-exact against the
reference and within 1 LSB of LiteRT."""

from __future__ import annotations

import contextlib
import io
import itertools
from dataclasses import replace

import pytest
from proofs import proven, small_options
from sessions import session
from test_schedule import check_allocation, check_schedule

from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.ir.schedule import Schedule, Stripe
from cascader.schedule.point_scheduler import ProposalKey
from cascader.testing.architectures import ds_cnn, mobilenet_v1
from cascader.verify.cut import cut_where_varying

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
SAMPLES = 4


def _smallest(system: tuple, max_plan_size: int):
    """A 16-channel DS-CNN's session (cut where its outputs vary: its softmax saturates)
    and its smallest schedule's point config, at most `max_plan_size` parts a plan (1:
    layer by layer, each layer's output laid over its input)."""
    cut, _ = cut_where_varying(ds_cnn(channels=16).build(), SAMPLES)
    found = session(cut, *system)
    options = replace(small_options("vela", False), max_plan_size=max_plan_size)
    return found, PointConfig(4096, options, 1 << 20)


def _row_runs(schedule: Schedule) -> dict[int, list[int]]:
    """Per plan of more than one stripe, its stripes' first output rows in run order."""
    runs: dict[int, list[int]] = {}
    for step in schedule.steps:
        if isinstance(step, Stripe):
            runs.setdefault(step.plan, []).append(step.ofm.start[1])
    return {plan: rows for plan, rows in runs.items() if len(rows) > 1}


def _upward(rows: list[int]) -> bool:
    return all(a > b for a, b in itertools.pairwise(rows))


def test_a_chain_of_laid_layers_turns_back_up() -> None:
    """Layer by layer, the depthwise-separable blocks' 25 x 10 x 16 maps (4,000 B) lay each
    output over its input, turning every other layer upward: less than two maps at any
    time, where a chain that only drifts down needs one more map's bytes per few layers."""
    found, config = _smallest(U55, 1)
    with contextlib.redirect_stdout(io.StringIO()):
        point = found.schedule(config)
    schedule = point.schedule
    assert any(plan.get("upward") for plan in point.cascade.chosen.to_json()["plans"])
    check_schedule(schedule)
    check_allocation(schedule)
    runs = _row_runs(schedule)
    upward = [p for p, rows in runs.items() if _upward(rows)]
    downward = [p for p, rows in runs.items() if _upward(rows[::-1])]
    assert upward and downward and len(upward) + len(downward) == len(runs)
    # Each plan running upward is next to one running down: the chain turns back.
    assert all(p - 1 in downward or p + 1 in downward for p in upward)
    assert schedule.sram_bytes < 2 * 4000
    # Upward, an output starts above the input it is laid over.
    for plan in upward:
        stripes = [s for s in schedule.steps if isinstance(s, Stripe) and s.plan == plan]
        out = schedule.buffers[stripes[0].ofm_buffer]
        source = schedule.buffers[stripes[0].ifms[0][1]]
        assert source.address < out.address < source.address + source.size


@pytest.mark.parametrize("max_plan_size", [1, 10], ids=["layers", "cascades"])
@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
def test_plans_laid_upward_are_bit_exact(system: tuple, max_plan_size: int) -> None:
    """The smallest schedules, layer by layer and with cascades beside the turned plans."""
    found, config = _smallest(system, max_plan_size)
    with contextlib.redirect_stdout(io.StringIO()):
        schedule = found.schedule(config).schedule
    runs = _row_runs(schedule)
    assert any(_upward(rows) for rows in runs.values())
    checked = proven(found, config, SAMPLES)
    for out in checked.outputs:
        assert out.reference_vs_litert.max_abs_diff <= checked.litert_tolerance <= 1


def test_a_turned_chain_that_packs_worse_gives_way_to_one_laid_down() -> None:
    """MobileNetV1 0.5 at 96, U65, pool 64 KiB: the fastest proposal within the pool turns a
    chain upward, which the allocation packs beside the chain before it in more than its
    budget; the run that turns no plan fits a faster proposal than any turned one that
    fits, and the point takes it."""
    found = session(mobilenet_v1(size=96, alpha=0.5).build(), *U65)
    pool, region = 65536, 1 << 20
    memory = found.device.memory(pool)
    options = CascaderOptions(
        cascade_region=memory.cascade_area,
        enable_striping=True,
        cost_model="vela",
        max_plan_size=14,
        always_copy_size=1024,
    )
    scheduler = found.prepared.scheduler
    turned = scheduler.proposals(memory, options, region, "turned")
    run = scheduler._run_key(memory, options, region, "turned")
    needs = {
        i: scheduler.need(memory, turned, ProposalKey(run, i))
        for i, p in enumerate(turned.proposals)
        if p.memory_usage <= pool
    }
    fastest = min(needs, key=lambda i: turned.proposals[i].cycles)
    assert any(plan.upward for plan in turned.proposals[fastest].plans)
    assert needs[fastest] > pool
    result, key = scheduler.chosen(memory, options, region)
    assert key.run == (*run, "down")
    assert scheduler.need(memory, result, key) <= pool
    fitting = [turned.proposals[i].cycles for i, need in needs.items() if need <= pool]
    assert result.chosen.cycles < min(fitting)
