"""A pool whose proposal fits only by its schedule's fallback (weights not prebuffered under
the op before, which the cascader's cycles assume) takes the proposal whose whole schedule
fits when Vela's model makes that faster (`PointScheduler._refitted`): a pool just past a
smaller, faster proposal's whole schedule no longer gets a larger one's slower fallback."""

from __future__ import annotations

from sessions import session

from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.schedule.point_scheduler import ProposalKey, _fitting
from cascader.testing.architectures import build_cached

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
REGION = 4 << 20
# DS-CNN options whose proposals' budgets undercount their prebuffered schedules: at 28,000 B
# the cascader's fastest proposal within the pool fits only by its fallback, 18% slower than
# the one a 26,000 B pool gets.
OPTIONS = CascaderOptions(enable_striping=True, stripe_factors=3, max_plan_size=4,
                          max_proposals=16, always_copy_size=65536, cost_model="vela")  # fmt: skip


def _config(pool: int) -> PointConfig:
    return PointConfig(pool, OPTIONS, REGION, row_sum_mean=True)


def test_a_larger_pool_is_not_slower_for_a_fallback():
    found = session(build_cached("ds_cnn"), *U55)
    small, large = (found.score(_config(pool)) for pool in (26_000, 28_000))
    assert small.fits and large.fits
    assert large.total_cycles <= small.total_cycles

    # The cascader's own choice at the larger pool is a fallback, and slower by Vela's model.
    config = _config(28_000)
    memory = found.device.memory(config.sram_bytes)
    scheduler = found.prepared_for(config).scheduler
    result = scheduler.proposals(memory, OPTIONS, REGION)
    run = scheduler.cascade_key(memory, OPTIONS, REGION)

    def least(i: int) -> int:
        return scheduler.need(memory, result, ProposalKey(run, i))

    own, _ = _fitting(result.proposals, config.sram_bytes, least)
    assert own is not None
    assert scheduler.need(memory, result, ProposalKey(run, own), whole=True) > config.sram_bytes
    assert scheduler.vela_cycles(memory, result, ProposalKey(run, own)) > large.total_cycles
