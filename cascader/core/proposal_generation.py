"""Proposal generation: dynamic programming over part groups, combining closed plans."""

from __future__ import annotations

from cascader.core.pareto import pareto_cull
from cascader.core.plan import Plan
from cascader.core.proposal import Proposal


class _PlanUse:
    """What adding one plan to a proposal needs, precomputed once per plan: its BOUNDARY
    configs, which of them enter the proposal's inputs, and the tensors whose accounting it
    changes."""

    __slots__ = ("boundary", "elsewhere", "homes", "out_tensor", "overrides", "plan", "touched")

    def __init__(self, plan: Plan, cascade: str) -> None:
        boundary = plan.boundary_configs
        self.plan = plan
        self.boundary = frozenset(boundary)
        self.overrides = {c.tensor.id: c for c in boundary if c.home_region == cascade}
        self.out_tensor = plan.output_config.tensor.id
        # One home per tensor, the plan's last word on it: a part's plan also carries the
        # output configs tried before its own (the original's accumulation), which home the
        # same tensor elsewhere when it may live in two regions (U65: SRAM and the DRAM
        # arena) and would otherwise make the plan incompatible with every proposal.
        homes = {c.tensor.id: c.home_region for c in boundary}
        self.homes = tuple(homes.items())
        self.elsewhere = {
            c.tensor.id: homes[c.tensor.id]
            for c in boundary
            if homes[c.tensor.id] != cascade and not c.tensor.is_constant
        }
        sizes = {c.tensor.id: c.tensor.size for c in boundary}
        sizes[self.out_tensor] = plan.output_config.tensor.size
        # Per tensor the plan touches: (its home or None, its size, whether a proposal's
        # input config of it is always the plan's to account for).
        self.touched = {
            tensor_id: (
                homes.get(tensor_id),
                size,
                tensor_id in self.overrides or tensor_id == self.out_tensor,
            )
            for tensor_id, size in sizes.items()
        }

    def memory_with(self, proposal: Proposal) -> int | None:
        """Peak memory after adding the plan, None if it cannot be added (shared parts, or
        a tensor homed differently by the plan and the proposal, in the cascade region or
        elsewhere): the plan's own memory
        plus every tensor the proposal still holds that the plan does not account for
        itself, or the proposal's earlier peak if higher. Walks the proposal's few input
        configs rather than the plan's many tensors."""
        if self.plan.part_group & proposal.part_group:
            return None
        elsewhere = proposal.elsewhere
        if elsewhere:
            for tensor_id, home in self.homes:
                found = elsewhere.get(tensor_id)
                if found is not None and found != home:
                    return None
        extra = proposal.input_size
        touched = self.touched
        for tensor_id, config in proposal.input_configs.items():
            found = touched.get(tensor_id)
            if found is not None:
                home, size, accounted = found
                if home is not None and config.home_region != home:
                    return None
                if accounted or config in self.boundary:
                    extra -= size
        return max(self.plan.memory_usage + extra, proposal.memory_usage)

    def add_to(self, proposal: Proposal, memory: int) -> Proposal:
        configs = dict(proposal.input_configs)
        configs.update(self.overrides)
        configs.pop(self.out_tensor, None)
        return Proposal(
            proposal.part_group | self.plan.part_group,
            (*proposal.plans, self.plan),
            configs,
            proposal.cascade_region,
            memory,
            proposal.cycles + self.plan.cycles,
            {**proposal.elsewhere, **self.elsewhere} if self.elsewhere else proposal.elsewhere,
        )


def plans_by_part(
    closed_plans: dict[int, list[Plan]], later_groups_first: bool = False
) -> dict[int, list[Plan]]:
    """Closed plans indexed by the highest part id in their group, the part the dynamic
    programme covers next, groups in creation order. The original walked a hash map here, so
    its order was unspecified; it decides which of two equal-cost proposals survives a cull.
    `later_groups_first` gives the reverse order (see tests/core/test_golden.py)."""
    indexed: dict[int, list[Plan]] = {}
    for group, plans in closed_plans.items():
        index = group.bit_length() - 1
        if later_groups_first:
            indexed[index] = list(plans) + indexed.get(index, [])
        else:
            indexed[index] = indexed.get(index, []) + list(plans)
    return indexed


def generate_proposals(
    closed_plans: dict[int, list[Plan]],
    all_parts: int,
    cascade_region: str,
    max_proposals: int,
    disable_pareto: bool,
    later_groups_first: bool = False,
) -> list[Proposal]:
    """Pareto-optimal proposals covering the part group `all_parts` (bitmask): the highest
    part of a group is covered by one of its plans, the rest recursively, memoised per
    residual group."""
    uses = {
        index: [_PlanUse(p, cascade_region) for p in plans if p.interior_region == cascade_region]
        for index, plans in plans_by_part(closed_plans, later_groups_first).items()
    }
    memo: dict[int, list[Proposal]] = {0: [Proposal(0, (), {}, cascade_region, 0, 0)]}

    def partial(group: int) -> list[Proposal]:
        found = memo.get(group)
        if found is not None:
            return found
        candidates: list[tuple[_PlanUse, Proposal]] = []
        memory: list[int] = []
        cycles: list[int] = []
        for use in uses.get(group.bit_length() - 1, ()):
            plan = use.plan
            for residual in partial(group & ~plan.part_group):
                peak = use.memory_with(residual)
                if peak is not None:
                    candidates.append((use, residual))
                    memory.append(peak)
                    cycles.append(residual.cycles + plan.cycles)
        kept = pareto_cull(
            list(range(len(candidates))), memory, cycles, max_proposals, disable_pareto
        )
        result = [candidates[i][0].add_to(candidates[i][1], memory[i]) for i in kept]
        memo[group] = result
        return result

    proposals = partial(all_parts)
    # `partial` refers to itself through its closure, a cycle only the cyclic collector frees;
    # emptied, it keeps no plan or proposal alive until then.
    memo.clear()
    uses.clear()
    return proposals


def choose_proposal(proposals: list[Proposal], region_size: int) -> int:
    """Index of the proposal to use: the last (highest-memory, fewest-cycles) one whose memory
    is below the region size, else the first (smallest). Deterministic: decided by index."""
    if not proposals:
        raise ValueError("there are no proposals to choose from")
    for index in range(len(proposals) - 1, -1, -1):
        if proposals[index].memory_usage < region_size:
            return index
    return 0
