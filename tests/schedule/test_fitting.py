"""A pool takes the fastest proposal whose schedule really fits among those whose budgets
come at most a little past it (`point_scheduler._fitting`), trying them fastest first: the
SRAM a schedule needs beyond its budget differs from one proposal to the next, so a miss
says nothing of the next one."""

from __future__ import annotations

import pytest
from sessions import session

from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.schedule.point_scheduler import _BUDGET_SLACK, ProposalKey, _fitting
from cascader.testing.architectures import build_cached

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
REGION = 4 << 20
# DS-CNN options whose proposals need from a little less to a little more than their
# budgets: at these pools the chooser that skipped budgets short by as much as the last
# miss tried three proposals that did not fit and took none, or a slower one.
OPTIONS = CascaderOptions(enable_striping=True, stripe_factors=5, max_plan_size=10,
                          enable_multi_dimensional_striping=True, always_copy_size=1024,
                          cost_model="vela")  # fmt: skip


@pytest.mark.parametrize("pool", [21_337, 22_000, 27_396, 36_720])
def test_the_fastest_proposal_that_fits_is_taken(pool: int):
    found = session(build_cached("ds_cnn"), *U55)
    config = PointConfig(pool, OPTIONS, REGION)
    memory = found.device.memory(pool)
    scheduler = found.prepared_for(config).scheduler
    result = scheduler.proposals(memory, OPTIONS, REGION)
    run = scheduler.cascade_key(memory, OPTIONS, REGION)
    props = result.proposals

    def least(i: int) -> int:
        return scheduler.need(memory, result, ProposalKey(run, i))

    taken, missed = _fitting(props, pool, least)
    assert taken is not None and least(taken) <= pool
    near = [i for i in range(len(props)) if props[i].memory_usage <= pool * _BUDGET_SLACK]
    faster = [i for i in near if (props[i].cycles, i) < (props[taken].cycles, taken)]
    assert sorted(missed) == sorted(faster)
    assert all(least(i) > pool for i in faster)

    # The point scheduled at the pool fits it.
    assert found.score(config).fits
