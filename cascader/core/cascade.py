"""The cascader entry point: graph + regions + homes + options -> proposals and the choice."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cascader.core.gc_pause import collector_paused
from cascader.core.graph import CascaderGraph
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.overlay import LAYINGS
from cascader.core.plan_context import PlanContext
from cascader.core.plan_generation import generate_graph_plans
from cascader.core.proposal import Proposal
from cascader.core.proposal_generation import choose_proposal, generate_proposals
from cascader.memo import caches_on, forget_memos


@dataclass
class CascadeResult:
    """Proposals in Pareto order (ascending memory, descending cycles), the index of the one
    chosen for the cascade region, and the wall time of plan + proposal generation."""

    proposals: list[Proposal]
    chosen_index: int
    seconds: float

    @property
    def chosen(self) -> Proposal:
        return self.proposals[self.chosen_index]

    def to_json(self) -> dict:
        return {
            "proposals": [p.to_json() for p in self.proposals],
            "chosen_index": self.chosen_index,
            "seconds": self.seconds,
        }


def cascade(
    graph: CascaderGraph,
    regions: dict[str, MemoryRegion],
    home_map: dict[int, list[str]],
    options: CascaderOptions,
    *,
    later_groups_first: bool = False,
    laying: str = "turned",
) -> CascadeResult:
    """Run the cascader on `graph`. `home_map` maps every tensor id to the names of the
    regions it may be homed in; `options.cascade_region` names the region cascades use.
    `later_groups_first` flips an order the original left unspecified (which of two
    equal-cost proposals survives); see proposal_generation.plans_by_part. `laying`: how
    the "vela" model counts outputs laid over their inputs (`core.overlay.LAYINGS`; such
    budgets the allocation may not reach, and a turned chain may pack worse beside the
    chain before it)."""
    if laying not in LAYINGS:
        raise ValueError(f"laying = {laying!r}, but must be one of {', '.join(LAYINGS)}")
    if not caches_on():  # every run starts cold: nothing of an earlier run is read
        for part in graph.parts:
            forget_memos(part)
    if options.cascade_region not in regions:
        raise ValueError(
            f"cascade region {options.cascade_region!r} is not among the regions "
            f"({', '.join(regions)})"
        )
    for tensor in graph.tensors:
        homes = home_map.get(tensor.id)
        if not homes:
            raise ValueError(f"tensor {tensor.id} has no home region")
        for name in homes:
            if name not in regions:
                raise ValueError(f"tensor {tensor.id} is homed in unknown region {name!r}")
    start = time.perf_counter()
    with collector_paused():
        # No names for the plan context and the closed plans: they are garbage once the
        # proposals exist, and freeing them before the collector resumes spares it a scan.
        proposals = generate_proposals(
            generate_graph_plans(PlanContext(graph, regions, home_map, options, laying)),
            graph.all_parts_mask,
            options.cascade_region,
            options.max_proposals,
            options.disable_pareto_proposals,
            later_groups_first,
        )
    seconds = time.perf_counter() - start
    chosen = choose_proposal(proposals, regions[options.cascade_region].size)
    return CascadeResult(proposals, chosen, seconds)
