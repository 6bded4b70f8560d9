"""On Ethos-U65 (Dedicated_Sram) a feature map may live in the SRAM or the DRAM arena: every
proposal of a real network homes each one in one place, so the plan that writes it and the
plans that read it agree (the schedule and the evaluator take one home per tensor)."""

from __future__ import annotations

import pytest
from model_cases import model_path
from sessions import prepared_model

from cascader.core.options import CascaderOptions
from cascader.ethosu.memory import system_memory
from cascader.frontend.tflite_import import load_tflite

U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")


@pytest.mark.parametrize("cost_model", ["tvm", "vela"])
def test_every_proposal_homes_each_feature_map_once(cost_model: str) -> None:
    # Before proposals checked homes outside the cascade region too, 36 of kws_dscnn's 117
    # proposals at these pools wrote a tensor to the SRAM that a later plan read from DRAM.
    prepared = prepared_model(load_tflite(model_path("kws_dscnn")), U65[0])
    graph = prepared.network.graph
    for pool in (16 << 10, 64 << 10, 256 << 10):
        memory = system_memory(*U65, pool)
        options = CascaderOptions(
            cascade_region=memory.cascade_area, enable_striping=True, cost_model=cost_model
        )
        for proposal in prepared.scheduler.proposals(memory, options, pool).proposals:
            agreed: dict[int, str] = {}
            for plan in proposal.plans:
                said = {c.tensor.id: c.home_region for c in plan.boundary_configs}
                for tid, home in said.items():
                    if not graph.tensors[tid].is_constant:
                        assert agreed.setdefault(tid, home) == home, (pool, tid)
