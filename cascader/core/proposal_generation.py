"""Proposal generation: dynamic programming over part groups, combining closed plans."""

from __future__ import annotations

import numpy as np

from cascader.core.pareto import pareto_cull
from cascader.core.plan import Plan
from cascader.core.proposal import Proposal


class _PlanUse:
    """What adding one plan to a proposal needs, precomputed once per plan: its BOUNDARY
    configs, the tensors whose accounting it changes (`touched`) and the configs it puts
    among the proposal's inputs. Whether the plan can join a proposal, and the memory it
    adds beyond its own, depend on `touched` only (see `_joins`), so plans alike in it share
    that work: `signature`. A plan laying its output over its input (`laid`) also holds the
    bytes a proposal's later plans lay beyond that output (`Proposal.drift`, `chain`), and
    may turn upward where that holds fewer (`Plan.laid_upward`)."""

    __slots__ = (
        "cycles",
        "elsewhere",
        "in_size",
        "laid",
        "memory_usage",
        "out_size",
        "out_tensor",
        "overrides",
        "part_group",
        "plan",
        "signature",
        "touched",
    )

    def __init__(self, plan: Plan, cascade: str) -> None:
        self.plan = plan
        self.part_group, self.memory_usage, self.cycles = (
            plan.part_group,
            plan.memory_usage,
            plan.cycles,
        )
        boundary = plan.boundary_configs
        self.overrides = {c.tensor.id: c for c in boundary if c.home_region == cascade}
        self.out_tensor = plan.output_config.tensor.id
        self.laid = plan.laid
        # One home per tensor, the plan's last word on it: a part's plan also carries the
        # output configs tried before its own (the original's accumulation), which home the
        # same tensor elsewhere when it may live in two regions (U65: SRAM and the DRAM
        # arena) and would otherwise make the plan incompatible with every proposal.
        homes = {c.tensor.id: c.home_region for c in boundary}
        self.elsewhere = {
            c.tensor.id: homes[c.tensor.id]
            for c in boundary
            if homes[c.tensor.id] != cascade and not c.tensor.is_constant
        }
        sizes = {c.tensor.id: c.tensor.size for c in boundary}
        sizes[self.out_tensor] = plan.output_config.tensor.size
        self.out_size = sizes[self.out_tensor]
        self.in_size = 0 if self.laid is None else sizes.get(self.laid[0], 0)
        # Per tensor the plan touches: (its home or None, its size, whether a proposal's
        # input config of it is the plan's to account for).
        self.touched = {
            tensor_id: (
                homes.get(tensor_id),
                size,
                tensor_id in self.overrides or tensor_id == self.out_tensor,
            )
            for tensor_id, size in sizes.items()
        }
        self.signature = frozenset(self.touched.items())

    def chain(self, below: np.ndarray, above: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per residual proposal laying `below` and `above` bytes beyond this plan's output
        (`Proposal.drift`): the bytes the chain adds beyond this plan's own pair, whether the
        plan turns upward for it (where that adds fewer), and the chain's bytes below and
        above the plan's input."""
        ins, out = self.in_size, self.out_size
        offset = self.laid[1]
        top = max(ins, out - offset)  # the pair's top above the input's start
        added = below + np.maximum(out - offset + above - top, 0)
        drift = (offset + below, np.maximum(out - offset + above - ins, 0))
        turn = np.zeros(len(below), dtype=bool)
        if self.plan.laid_upward is not None:
            up, extra = self.plan.laid_upward
            top = max(ins, up + out)
            added_up = np.maximum(below - up, 0) + np.maximum(up + out + above - top, 0) + extra
            turn = added_up < added
            added = np.where(turn, added_up, added)
            drift = (
                np.where(turn, np.maximum(below - up, 0), drift[0]),
                np.where(turn, np.maximum(up + out + above - ins, 0), drift[1]),
            )
        return added, turn, *drift

    def add_to(
        self, proposal: Proposal, memory: int, drift: tuple[int, int], turn: bool
    ) -> Proposal:
        """`proposal` with this plan added (`turn`: its copy running upward), holding
        `memory` at its peak; `drift`: the bytes the chain from this plan's input on lays
        below and above it, when the plan is laid."""
        configs = dict(proposal.input_configs)
        configs.update(self.overrides)
        configs.pop(self.out_tensor, None)
        drift_of = proposal.drift
        if self.laid is not None or self.out_tensor in drift_of:
            drift_of = {k: v for k, v in drift_of.items() if k != self.out_tensor}
            if self.laid is not None:
                drift_of[self.laid[0]] = drift
        return Proposal(
            proposal.part_group | self.part_group,
            (*proposal.plans, self.plan.turned() if turn else self.plan),
            configs,
            proposal.cascade_region,
            memory,
            proposal.cycles + self.cycles,
            {**proposal.elsewhere, **self.elsewhere} if self.elsewhere else proposal.elsewhere,
            drift_of,
        )


class _Residuals:
    """A residual group's proposals as arrays over them: their input bytes, memory and
    cycles and, per tensor a plan asks about, the region each homes it in among its input
    configs or among its homes elsewhere (a region's code in `codes`, -1 where it does not
    hold the tensor; None when none does). Which of them a plan joins is then a few array
    operations per tensor the plan touches."""

    __slots__ = (
        "_allowed",
        "_drift",
        "_elsewhere",
        "_held",
        "_inputs",
        "codes",
        "cycles",
        "input_size",
        "memory",
        "proposals",
    )

    def __init__(self, proposals: list[Proposal], codes: dict[str, int]) -> None:
        self.proposals = proposals
        self.codes = codes
        self.input_size = np.array([p.input_size for p in proposals], dtype=np.int64)
        self.memory = np.array([p.memory_usage for p in proposals], dtype=np.int64)
        self.cycles = np.array([p.cycles for p in proposals], dtype=np.int64)
        self._inputs: dict[int, np.ndarray | None] = {}
        self._elsewhere: dict[int, np.ndarray | None] = {}
        self._allowed: dict[tuple[int, int], np.ndarray | None] = {}
        self._held: dict[tuple[int, int], np.ndarray | None] = {}
        self._drift: dict[int, np.ndarray] = {}  # tensor -> (below, above) x proposals

    def drift(self, tensor_id: int) -> np.ndarray:
        """Per proposal, the bytes it lays below and above the tensor (`Proposal.drift`):
        an array of two rows."""
        found = self._drift.get(tensor_id)
        if found is None:
            found = self._drift[tensor_id] = (
                np.array([p.drift.get(tensor_id, (0, 0)) for p in self.proposals], dtype=np.int64)
                .reshape(-1, 2)
                .T
            )
        return found

    def homes(self, tensor_id: int, elsewhere: bool) -> np.ndarray | None:
        """Per proposal, the code of the region it homes the tensor in: among its homes
        elsewhere if `elsewhere`, else among its input configs."""
        memo = self._elsewhere if elsewhere else self._inputs
        if tensor_id in memo:
            return memo[tensor_id]
        if elsewhere:
            regions = [p.elsewhere.get(tensor_id) for p in self.proposals]
        else:
            configs = [p.input_configs.get(tensor_id) for p in self.proposals]
            regions = [None if c is None else c.home_region for c in configs]
        found = None
        if regions.count(None) < len(regions):
            codes = self.codes
            found = np.array(
                [-1 if r is None else codes.setdefault(r, len(codes)) for r in regions],
                dtype=np.int64,
            )
        memo[tensor_id] = found
        return found

    def allowed(self, tensor_id: int, code: int) -> np.ndarray | None:
        """Per proposal, whether it leaves the tensor to a plan homing it in region `code`
        (None: every proposal does)."""
        key = (tensor_id, code)
        if key in self._allowed:
            return self._allowed[key]
        found = None
        for homes in (self.homes(tensor_id, False), self.homes(tensor_id, True)):
            if homes is not None:
                ok = (homes < 0) | (homes == code)
                found = ok if found is None else found & ok
        self._allowed[key] = found
        return found

    def held_bytes(self, tensor_id: int, size: int) -> np.ndarray | None:
        """Per proposal, the bytes of the tensor (of `size`) among its input configs (None:
        no proposal holds it)."""
        key = (tensor_id, size)
        if key in self._held:
            return self._held[key]
        held = self.homes(tensor_id, False)
        found = None if held is None else np.where(held >= 0, size, 0)
        self._held[key] = found
        return found


def _joins(use: _PlanUse, residuals: _Residuals) -> tuple[np.ndarray, ...]:
    """The proposals a plan like `use` can join, and what each still holds that such a plan
    does not account for itself: (their indices, those bytes, their memory, their cycles).
    A plan cannot join a proposal homing one of its tensors differently, in the cascade
    region or elsewhere. The proposal's input configs are all homed in the cascade region,
    so one the plan homes elsewhere conflicts, and one it homes there (or makes) is its own:
    the result depends on `use.touched` alone. (Residual proposals never share a part
    with the plan: they cover the rest of its group.)"""
    joins = None
    extra = residuals.input_size
    codes = residuals.codes
    for tensor_id, (home, size, accounted) in use.touched.items():
        if home is not None:
            allowed = residuals.allowed(tensor_id, codes.setdefault(home, len(codes)))
            if allowed is not None:
                joins = allowed if joins is None else joins & allowed
        if accounted:
            held = residuals.held_bytes(tensor_id, size)
            if held is not None:
                extra = extra - held
    picked = np.arange(len(extra)) if joins is None else np.flatnonzero(joins)
    return picked, extra[picked], residuals.memory[picked], residuals.cycles[picked]


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

    # Per (plan signature, residual group): `_joins` of the residual group's proposals, from
    # the group's `_Residuals` (regions coded in `codes`).
    joins: dict[tuple[frozenset, int], tuple[np.ndarray, ...]] = {}
    tables: dict[int, _Residuals] = {}
    codes: dict[str, int] = {}

    def partial(group: int) -> list[Proposal]:
        found = memo.get(group)
        if found is not None:
            return found
        # Candidates in the original's order: plan after plan, each with the residual
        # proposals it joins in their order (their index breaks exact ties in the cull).
        entries: list[tuple[_PlanUse, list[Proposal], np.ndarray]] = []
        extras: list[np.ndarray] = []
        helds: list[np.ndarray] = []
        spents: list[np.ndarray] = []
        turns: list[np.ndarray] = []
        drifts: list[np.ndarray] = []
        for use in uses.get(group.bit_length() - 1, ()):
            rest = group & ~use.part_group
            residuals = memo.get(rest)
            if residuals is None:
                residuals = partial(rest)
            key = (use.signature, rest)
            joined = joins.get(key)
            if joined is None:
                table = tables.get(rest)
                if table is None:
                    table = tables[rest] = _Residuals(residuals, codes)
                joined = joins[key] = _joins(use, table)
            picked, extra, held, spent = joined
            if len(picked):
                turn = np.zeros(len(picked), dtype=bool)
                drift = np.zeros((2, len(picked)), dtype=np.int64)
                if use.laid is not None:
                    below, above = tables[rest].drift(use.out_tensor)[:, picked]
                    added, turn, *beyond = use.chain(below, above)
                    extra = extra + added
                    drift = np.array(beyond, dtype=np.int64)
                entries.append((use, residuals, picked))
                extras.append(extra)
                helds.append(held)
                spents.append(spent)
                turns.append(turn)
                drifts.append(drift)
        if not entries:
            memo[group] = []
            return []
        # A candidate holds the larger of its plan's memory plus what the residual proposal
        # holds beyond it, and the residual's own peak; its cycles add up.
        counts = [len(picked) for _, _, picked in entries]
        entry_of = np.repeat(np.arange(len(entries)), counts)
        position = np.arange(len(entry_of)) - np.repeat(np.cumsum(counts) - counts, counts)
        own_memory = np.array([use.memory_usage for use, _, _ in entries], dtype=np.int64)
        own_cycles = np.array([use.cycles for use, _, _ in entries], dtype=np.int64)
        peaks = np.maximum(own_memory[entry_of] + np.concatenate(extras), np.concatenate(helds))
        spent_all = own_cycles[entry_of] + np.concatenate(spents)
        kept = pareto_cull(range(len(entry_of)), peaks, spent_all, max_proposals, disable_pareto)
        turn_all = np.concatenate(turns)
        drift_all = np.concatenate(drifts, axis=1)
        result = []
        for i in kept:
            use, residuals, picked = entries[entry_of[i]]
            proposal = residuals[picked[position[i]]]
            drift = (int(drift_all[0, i]), int(drift_all[1, i]))
            result.append(use.add_to(proposal, int(peaks[i]), drift, bool(turn_all[i])))
        memo[group] = result
        return result

    proposals = partial(all_parts)
    # `partial` refers to itself through its closure, a cycle only the cyclic collector frees;
    # emptied, it keeps no plan or proposal alive until then.
    memo.clear()
    uses.clear()
    joins.clear()
    tables.clear()
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
