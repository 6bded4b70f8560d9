"""One design point's schedule on a network: with the cascader on, the proposal chosen for the
pool among those generated for a cascade region (the fastest whose schedule really fits); off,
the copy-constants schedule. A `PointScheduler` belongs to one network and keeps what many
points of it share: the cascader's runs, proposal schedules and the SRAM they really need."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from cascader.core.cascade import CascadeResult, cascade
from cascader.core.options import CascaderOptions
from cascader.core.overlay import LAYINGS
from cascader.ethosu.codegen import scored_ops
from cascader.ethosu.graph import graph_document
from cascader.ethosu.memory import SystemMemory, system_memory
from cascader.ethosu.perf import evaluate
from cascader.ethosu.weights import encoded_size
from cascader.ir.errors import ScheduleError
from cascader.ir.schedule import Schedule
from cascader.memo import Memo
from cascader.schedule.network import Network
from cascader.schedule.policies import (
    ScheduleKey,
    layer_plans,
    layer_plans_schedule,
    plans_schedule,
    proposal_plans,
)

__all__ = ["Point", "PointScheduler", "ProposalKey", "proposal_options"]

# The cascader's budget of a proposal and the SRAM its schedule really takes differ (encoded
# weight sizes, alignment, buffers the budget counts twice, outputs laid over inputs that the
# allocation keeps apart), so a pool looks a little past the budget for a proposal that
# really fits, trying the fastest few at most (each try builds a schedule, kept by its key).
_BUDGET_SLACK = 1.04
_FIT_TRIES = 8
# A pool none of whose tries fits reports the least SRAM among those tries and the smallest
# budgets, this many of them (an infeasible point's score only says how far off it is).
_LEAST_TRIES = 3


class ProposalKey(NamedTuple):
    """What one proposal's schedule is cached by: the key of the cascader run that made it
    (`PointScheduler.cascade_key`) and its index among that run's proposals."""

    run: tuple
    index: int


@dataclass(frozen=True)
class Point:
    """One design point's schedule: the memory system, the cascader's run (None when off,
    its `chosen_index` the proposal scheduled), the stripe schedule and whether it fits."""

    memory: SystemMemory
    cascade: CascadeResult | None
    schedule: Schedule
    fits: bool


def proposal_options(options: CascaderOptions) -> CascaderOptions:
    """The options that make the same proposals as `options`: without striping every part
    has only its whole output as a stripe, whatever the stripe factors and whether striping
    is multi-dimensional, so those take their defaults and such option sets share one run
    (invalid stripe factors stay, for the cascader to refuse)."""
    if options.enable_striping or options.stripe_factors <= 0:
        return options
    defaults = CascaderOptions()
    return replace(
        options,
        stripe_factors=defaults.stripe_factors,
        enable_multi_dimensional_striping=defaults.enable_multi_dimensional_striping,
    )


class PointScheduler:
    """Schedules design points of one network. Caches, bounded: cascader runs by (system,
    options, region) (`cascades`), since a sweep chooses among one set of proposals for
    every pool; per proposal (by its key) the `ScheduleKey` of its plans (`keys`), and by
    those keys the schedules of a few (`schedules`: tens of thousands of objects each,
    which every full garbage collection scans) and the SRAM bytes of many (`needs`): a
    schedule depends on its plans and the memory system, not on the pool it was chosen for
    (only whether it fits does) nor on the options that made the plans, so proposals of
    several option sets, and layer-by-layer points of several pools, share one. And by
    those keys and whether the pool takes the schedule's fallback, Vela's cycles of the
    schedules a choice compared (`cycles`): only pools where the cascader's choice fits by
    its fallback compare, and many pools choose the same pair."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self.cascades: Memo[tuple, CascadeResult] = Memo("PointScheduler.cascades", 64)
        self.keys: Memo[ProposalKey, ScheduleKey] = Memo("PointScheduler.keys", 4096)
        self.schedules: Memo[ScheduleKey, Schedule] = Memo("PointScheduler.schedules", 8)
        self.needs: Memo[ScheduleKey, tuple[int, int]] = Memo("PointScheduler.needs", 4096)
        self.cycles: Memo[tuple[ScheduleKey, bool], float] = Memo("PointScheduler.cycles", 1024)
        self.layers: Memo[tuple, tuple[ScheduleKey, list]] = Memo("PointScheduler.layers", 4)

    def cascade_key(self, memory: SystemMemory, options: CascaderOptions, region: int) -> tuple:
        """What a cascader run of this network depends on (a `ProposalKey`'s `run`)."""
        return (*memory.system, proposal_options(options), region)

    def proposals(
        self,
        memory: SystemMemory,
        options: CascaderOptions,
        region_bytes: int,
        laying: str = "turned",
    ) -> CascadeResult:
        """The cascader's proposals for a cascade region of `region_bytes`, counting outputs
        laid over the inputs they consume as `cascade`'s `laying` says."""
        key = self._run_key(memory, options, region_bytes, laying)
        found = self.cascades.lookup(key)
        if found is not None:
            return found
        region = system_memory(memory.accelerator, memory.system_config, memory.memory_mode,
                               region_bytes, memory.vela_ini)  # fmt: skip
        document = graph_document(self.network.graph, region, proposal_options(options))
        try:
            found = cascade(document.graph, document.regions, document.home_map,
                            document.options, laying=laying)  # fmt: skip
        except ValueError as error:  # no proposal covers the graph
            raise ScheduleError(f"the cascader made no schedule: {error}") from None
        self.cascades.keep(key, found)
        return found

    def _run_key(
        self, memory: SystemMemory, options: CascaderOptions, region: int, laying: str
    ) -> tuple:
        """`cascade_key`, with a mark for a run that turns no laid output or lays none."""
        base = self.cascade_key(memory, options, region)
        return base if laying == "turned" else (*base, laying)

    def schedule_key(
        self, memory: SystemMemory, result: CascadeResult, key: ProposalKey
    ) -> ScheduleKey:
        """The `ScheduleKey` of the proposal of `result` that `key` names."""
        found = self.keys.lookup(key)
        if found is None:
            plans = proposal_plans(self.network, result.proposals[key.index], memory)
            found = ScheduleKey("proposal", memory, plans)
            self.keys.keep(key, found)
        return found

    def proposal_schedule(
        self, memory: SystemMemory, result: CascadeResult, key: ProposalKey
    ) -> Schedule:
        """The schedule of the proposal of `result` that `key` names, as the pool runs it."""
        return _for(self._built(memory, result, key), memory)

    def _built(self, memory: SystemMemory, result: CascadeResult, key: ProposalKey) -> Schedule:
        """The proposal's schedule as built (with its fallback, whatever the pool)."""
        content = self.schedule_key(memory, result, key)
        schedule = self.schedules.lookup(content)
        if schedule is None:
            size = encoded_size(memory.accelerator, self.network.ops)
            plans = proposal_plans(self.network, result.proposals[key.index], memory)
            schedule = plans_schedule(self.network, plans, memory, size, check=False)
            self._keep(content, schedule)
        return schedule

    def _keep(self, content: ScheduleKey, schedule: Schedule) -> None:
        self.schedules.keep(content, schedule)
        self.needs.keep(content, (schedule.least_sram_bytes, schedule.sram_bytes))

    def need(
        self, memory: SystemMemory, result: CascadeResult, key: ProposalKey, whole: bool = False
    ) -> int:
        """The SRAM bytes the schedule of the proposal `key` names really takes: at least (its
        fallback's, where smaller) or, `whole`, its own (every weight copy prebuffered as the
        cascader's cycles count it)."""
        found = self.needs.lookup(self.schedule_key(memory, result, key))
        if found is None:
            schedule = self._built(memory, result, key)
            found = schedule.least_sram_bytes, schedule.sram_bytes
        return found[1] if whole else found[0]

    def vela_cycles(self, memory: SystemMemory, result: CascadeResult, key: ProposalKey) -> float:
        """Vela's cycles of the proposal's schedule as the pool runs it (`proposal_schedule`)."""
        schedule = self._built(memory, result, key)
        fallback = schedule.fitted(memory.sram_bytes) is not schedule
        content = (self.schedule_key(memory, result, key), fallback)
        found = self.cycles.lookup(content)
        if found is None:
            ran = _for(schedule, memory)
            found = evaluate(scored_ops(ran, memory.accelerator), memory).total_cycles
            self.cycles.keep(content, found)
        return found

    def _refitted(self, memory: SystemMemory, result: CascadeResult, run: tuple, index: int) -> int:
        """The proposal `index` (`_fitting`'s choice) or, where its schedule fits the pool only
        by its fallback, whose weight copies then wait for the op before (which the
        cascader's cycles do not count), the proposal `_fitting` takes among whole schedules
        when Vela's model makes that one faster: a pool just past a small proposal's whole
        schedule no longer falls to a larger proposal's slower fallback."""
        pool = memory.sram_bytes

        def whole(i: int) -> int:
            return self.need(memory, result, ProposalKey(run, i), whole=True)

        if whole(index) <= pool:
            return index
        other, _ = _fitting(result.proposals, pool, whole)
        if other is None:
            return index
        ours, theirs = (
            self.vela_cycles(memory, result, ProposalKey(run, i)) for i in (index, other)
        )
        return other if theirs < ours else index

    def takes_fallback(self, content: ScheduleKey, pool: int) -> bool | None:
        """Whether a pool of `pool` bytes gets the fallback of the schedule `content` names
        (see `_for`): its steps, SRAM and cycles are another schedule's. None when that
        schedule's sizes are not known (not built, or forgotten)."""
        found = self.needs.lookup(content)
        if found is None:
            return None
        least, own = found
        return least < own and own > pool

    def layer_key(
        self, memory: SystemMemory, feature_maps: str = "io", buffer_weights: bool = True
    ) -> ScheduleKey:
        """The `ScheduleKey` of a point's copy-constants schedule (cascader off)."""
        return self._layer_plans(memory, feature_maps, buffer_weights)[0]

    def _layer_plans(
        self, memory: SystemMemory, feature_maps: str, buffer_weights: bool
    ) -> tuple[ScheduleKey, list]:
        """The layer plans of a pool and their key, kept for a few pools: a point asks for
        its key, then (scored for the first time) its schedule."""
        found = self.layers.lookup((memory, feature_maps, buffer_weights))
        if found is None:
            size = encoded_size(memory.accelerator, self.network.ops)
            plans = layer_plans(self.network, memory, size, feature_maps, buffer_weights)
            policy = "layer" if buffer_weights else "layer, weights in place"
            found = (ScheduleKey(policy, memory, plans, feature_maps), plans)
            self.layers.keep((memory, feature_maps, buffer_weights), found)
        return found

    def chosen(
        self,
        memory: SystemMemory,
        options: CascaderOptions,
        proposal_region_bytes: int | None = None,
    ) -> tuple[CascadeResult, ProposalKey]:
        """The proposals with the one chosen for the pool, and the key of its schedule: the
        fastest whose schedule really fits among those whose budgets come at most a little
        past the pool (`_fitting`, a few tries at most); one that fits only by its fallback
        gives way to a whole schedule Vela's model makes faster (`_refitted`).
        Where `_hedged`: when none fits, or a proposal with a plan laid upward was tried and
        did not fit (a turned chain can pack worse beside the chain before it than its
        budget says), the same among the proposals of a run that turns none, the faster of
        the two fits taken; and where none of those fits, among those of a run that lays
        none. When none fits, the one of the smallest few that really needs least, so an
        infeasible point reports the least SRAM any schedule needs."""
        region = proposal_region_bytes or memory.sram_bytes
        pool = memory.sram_bytes
        tried: list[tuple[CascadeResult, ProposalKey]] = []
        best: tuple[CascadeResult, ProposalKey] | None = None
        turned_missed = False
        for laying in LAYINGS if _hedged(memory, options) else LAYINGS[:1]:
            if laying == "down" and best is not None and not turned_missed:
                continue
            if laying == "apart" and best is not None:
                continue
            generated = self.proposals(memory, options, region, laying)
            props = generated.proposals
            base = self._run_key(memory, options, region, laying)

            def need(index: int, generated=generated, base=base) -> int:
                return self.need(memory, generated, ProposalKey(base, index))

            found, missed = _fitting(props, pool, need)
            turned_missed = any(plan.upward for i in missed for plan in props[i].plans)
            if found is not None:
                found = self._refitted(memory, generated, base, found)
                faster = best is None or props[found].cycles < best[0].chosen.cycles
                if faster:
                    best = replace(generated, chosen_index=found), ProposalKey(base, found)
                if not turned_missed:
                    break
                continue
            smallest = sorted(range(len(props)), key=lambda i: (props[i].memory_usage, i))
            tried += [
                (generated, ProposalKey(base, i))
                for i in dict.fromkeys([*missed, *smallest[:_LEAST_TRIES]])
            ]
        if best is not None:
            return best
        generated, key = min(
            tried,
            key=lambda t: (
                self.need(memory, t[0], t[1]),
                t[0].proposals[t[1].index].cycles,
                len(t[1].run),
                t[1].index,
            ),
        )
        return replace(generated, chosen_index=key.index), key

    def chosen_point(self, memory: SystemMemory, result: CascadeResult, key: ProposalKey) -> Point:
        """The point of the proposal `chosen` picked (`key`, naming `result.chosen_index`)."""
        schedule = self.proposal_schedule(memory, result, key)
        return Point(memory, result, schedule, schedule.sram_bytes <= memory.sram_bytes)

    def schedule_point(
        self,
        memory: SystemMemory,
        options: CascaderOptions | None,
        feature_maps: str = "io",
        proposal_region_bytes: int | None = None,
        buffer_weights: bool = True,
    ) -> Point:
        """The stripe schedule of a point. With the cascader on, the chosen proposal (the
        smallest one when none fits, so an infeasible point still has a score); off, the
        copy-constants schedule with feature maps in the `feature_maps` role's area, weights
        buffered where Vela would or, without `buffer_weights`, all read in place. The point
        fits when what the schedule holds in SRAM fits the pool (the cascader's own
        budget of a proposal counts some buffers twice, so it can refuse one that fits).

        Proposals are generated for a cascade region of `proposal_region_bytes` (default:
        the pool) and the proposal is chosen for the pool. A larger generation region keeps
        every small proposal and adds larger ones, so a sweep generates once at its largest
        pool."""
        if options is None:
            content, plans = self._layer_plans(memory, feature_maps, buffer_weights)
            schedule = self.schedules.lookup(content)
            if schedule is None:
                size = encoded_size(memory.accelerator, self.network.ops)
                schedule = layer_plans_schedule(self.network, plans, memory, size, check=False)
                self._keep(content, schedule)
            schedule = _for(schedule, memory)
            return Point(memory, None, schedule, schedule.sram_bytes <= memory.sram_bytes)
        return self.chosen_point(memory, *self.chosen(memory, options, proposal_region_bytes))


def _fitting(props: list, pool: int, need: Callable[[int], int]) -> tuple[int | None, list[int]]:
    """The index of the proposal of `props` `PointScheduler.chosen` takes for a pool, None
    if none of its tries fits; and the ones it tried that did not fit. It tries the proposals
    whose budgets come at most a little past the pool, fastest first: a proposal's schedule
    can need more or less than its budget, by amounts that differ from one proposal to the
    next, so what one miss says about the others is no guide and the next fastest is tried."""
    limit = pool * _BUDGET_SLACK
    among = [i for i in range(len(props)) if props[i].memory_usage <= limit]
    if not among:  # none near the pool: the smallest, for an infeasible point's score
        among = [min(range(len(props)), key=lambda i: (props[i].memory_usage, i))]
    tried: list[int] = []
    for index in sorted(among, key=lambda i: (props[i].cycles, i))[:_FIT_TRIES]:
        if need(index) <= pool:
            return index, tried
        tried.append(index)
    return None, tried


def _hedged(memory: SystemMemory, options: CascaderOptions) -> bool:
    """Whether a pool whose proposals counting laid outputs miss tries those of runs that
    turn none or lay none (`chosen`): where the SRAM holds the model's feature maps (the
    arena), a budget counting laid whole tensors plan by plan can be short of what the
    allocation reaches. Where the arena is elsewhere, the SRAM holds few whole tensors and
    one run serves."""
    return (
        options.cost_model == "vela"
        and options.enable_striping
        and memory.io_area == memory.cascade_area
    )


def _for(schedule: Schedule, memory: SystemMemory) -> Schedule:
    """A shared schedule as one of `memory`'s pool: the same steps and buffers (its fallback's
    where only that fits the pool), its memory the point's (a report reads the pool from it)."""
    schedule = schedule.fitted(memory.sram_bytes)
    return schedule if schedule.memory is memory else replace(schedule, memory=memory)
