"""Front refinement: some sampler trials step along the SRAM staircase of a front point.

A point's cascader proposals are generated once per option set and chosen per pool, so the
front of one option set is a staircase: each proposal holds from the SRAM it really needs up
to the next one's. A sampled pool rarely lands on a step, but a pool one unit below a front
point's SRAM use gives exactly the next step down, and a pool a little above it the next step
or two up; each costs only a schedule and a score (the proposals are cached). So two of every
three sampler trials, while some front point has a step not tried yet, run the step into the
front's largest gap instead of a sampled point; the rest stay with the sampler. (Several
processes sharing a study step only when no other trial is running, see next_step.)

A gap of the front wider than PROBE_GAP is also probed (`gap_probes`): at its middle with the
options of the points just above it and PROBE_GAP above its lower end with those of the
points just below it (each pool takes the proposal the cascader ranks fastest within it, by
its own cost rather than Vela's, so an option set's schedule at a pool inside the gap can be
one that a step down from the point above it skips, or that steps up from a point below it,
off the front, never reach), and just below its upper end with mixes of its two ends'
options (`crossings`); a cliff (cycles dropping by more than PROBE_GAP over a narrower SRAM
step, or over several) with those mixes alone. A gap's probes go before the steps into it,
and steps start from each schedule once (`_schedules`).

Vela's own compiler (`vela` points) has no staircase of proposals: its (SRAM used, cycles)
jumps about with its arena size limit, so an arena between two tried ones can give a
schedule that uses less SRAM *and* fewer cycles than both (Ethos-U85, mobilenet_like_96:
arena 30,048 B gives 26,864 B at 492,509 cycles, arena 32,768 B 28,912 B at 492,711). Its
points are refined by bisecting the arena (`vela_refinements`), in three tiers: first the
pools below each front point (between it and the next smaller pool tried with its options,
where its schedule, or a better one, may start with less SRAM; and the bottom of the pool
range for an option set near the front not run there yet), then a step down from each front
point to just below the SRAM it used (`steps`: its options must find another schedule there,
often the same one packed tighter), then every other pair; within a tier the widest pair
first, a pair split until its pools are BISECT_RATIO apart or its two results are equal.
Ranked by the area of the front gap they land in, as steps are, the bisections spent most
trials in gaps no arena fills, and reached last the Vela points a fraction of a percent
better than the front (thin gaps). A `vela` refinement competes with the steps and probes by
the gap its pool lands in, so a study of both producers still refines where its front is
emptiest.

The system attrs that mark a refinement trial name the trial it came from: STEP_OF (a step),
PROBE_OF (a gap probe: the trial whose options it took), BISECT_OF (an arena bisection: the
trial at the lower pool of the pair it splits, or the option set's smallest pool when it
tries the bottom of the range).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from cascader.core.options import CascaderOptions
from dse.front import pareto_front
from dse.space import SRAM_ALIGN

STEP_OF = "dse.step_of"  # system attr: the front trial a step trial came from
PROBE_OF = "dse.probe_of"  # system attr: the trial whose options a gap probe took
BISECT_OF = "dse.bisect_of"  # system attr: the lower trial of the pair an arena bisection split
POOL = "sram_units"  # the pool parameter, in SRAM_ALIGN units
# Of every STEP_CYCLE sampler trials, all but one step while a step is left. A step costs a
# schedule (about 0.05 s on MobileNetV2) where a sampled trial of a new option set costs a
# cascader run (0.2-2 s); on the shared models two steps per sampled trial match Vela's points
# as one did, within the variation between runs (docs/journal-2026.md), in 60% of the time.
STEP_CYCLE = 3
_TAKEN = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)
_CASCADER_OPTIONS = frozenset(f.name for f in fields(CascaderOptions))


def _params_key(params: dict[str, Any]) -> tuple:
    return tuple(sorted(params.items()))


# A step up asks for this much more SRAM than a front point uses: enough to pass the next
# proposal of the same options or two (their SRAM needs lie a fraction of a percent to a few
# percent apart); the step downs from the point it finds fill in whatever it skipped.
STEP_UP = 1 / 32


def _below(trial: FrozenTrial) -> int:
    """The largest pool, in units, under the SRAM `trial`'s schedule used."""
    return (trial.user_attrs["metrics"]["sram_used_bytes"] - 1) // SRAM_ALIGN


def steps(
    trial: FrozenTrial, low_units: int, high_units: int
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The trial's parameters with the largest aligned pool below the SRAM it used (the next
    smaller schedule of its options) and with a pool STEP_UP above it (a faster one); None
    for a point without cascader proposals to step through, a step down from its options'
    smallest proposal (it would only find that one again), or a pool outside the space.
    A trial whose pool was more than it used found no new schedule up to its pool, so its
    step up goes past the pool, and a step trial's twice as far past what it used: sparse
    proposals (a multi-dimensional floor whose next proposal is 40% bigger) are reached in
    a few doublings, not dozens of steps. A `vela` point steps down only, whatever its pool
    or options: the arena bisection (`vela_refinements`) covers the pools above it."""
    metrics = trial.user_attrs["metrics"]
    used = metrics["sram_used_bytes"]
    if producer(trial.params) == "vela":
        down = _below(trial)
        return ({**trial.params, POOL: down} if low_units <= down <= high_units else None), None
    if not trial.params.get("enable_cascader", True):
        return None, None
    # A point on its options' first proposal has no smaller schedule to step down to.
    first = metrics.get("cascader", {}).get("chosen_index") == 0
    down = None if first else _below(trial)
    target = used * (1 + STEP_UP)
    pool = trial.params[POOL] * SRAM_ALIGN
    if STEP_OF in trial.system_attrs:
        target = max(target, used + 2 * (pool - used))
    elif pool > used:
        target = max(target, pool + 1)
    up = -(-round(target) // SRAM_ALIGN)
    return tuple(
        {**trial.params, POOL: u} if u is not None and low_units <= u <= high_units else None
        for u in (down, up)
    )


# Points this close to the front in cycles step too: a schedule a step away from one may
# beat the front (the next proposal of options whose smallest one another option set ties).
NEAR = 0.05


def _cost(trial: FrozenTrial) -> tuple[float, float]:
    """The point's (log SRAM, log cycles): gaps are measured in ratios, not bytes."""
    m = trial.user_attrs["metrics"]
    return math.log(m["sram_used_bytes"] + SRAM_ALIGN), math.log(m["total_cycles"] + 1)


def near_front(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Feasible trials no other point beats by more than NEAR in cycles with no more SRAM."""
    points = sorted(
        (*_cost(t), t.number, t) for t in trials if t.user_attrs.get("metrics", {}).get("fits")
    )
    near, best = [], math.inf
    for _, cycles, _, trial in points:
        if cycles + math.log1p(-NEAR) <= best:
            near.append(trial)
        best = min(best, cycles)
    return near


def _schedules(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """One trial per schedule among `trials` (same options, same SRAM used and cycles): the
    one run at the largest pool (ties: the first), which has shown that nothing else fits up
    to there, so its step up goes furthest. Steps from each of several trials of one schedule
    land a few bytes apart and find it again: on U-Net 128, U65, 11 of a sweep's 29 refining
    trials found a schedule found before."""
    kept: dict[tuple, FrozenTrial] = {}
    for trial in trials:
        key = (_options_key(trial.params), _result(trial))
        other = kept.get(key)
        if other is None or trial.params[POOL] > other.params[POOL]:
            kept[key] = trial
    return list(kept.values())


def _gap(front: list[tuple[float, float]], srams: list[float], sram: float, up: bool) -> float:
    """The empty area, in log SRAM x log cycles, of the front's rectangle a step from `sram`
    lands in: between the front's last point at or below `sram` and its next (a step up),
    or between its first point at or above `sram` and its previous (a step down). `srams`:
    the front's SRAM column."""
    b = bisect.bisect_right(srams, sram) if up else bisect.bisect_left(srams, sram)
    if b == 0 or b == len(front):
        return 0.0
    (sa, ca), (sb, cb) = front[b - 1], front[b]
    return (sb - sa) * max(0.0, ca - cb)


# A front gap wider than this SRAM ratio is probed at its middle: steps of STEP_UP from its
# lower end take a dozen trials to cross it, and a step down from its upper end only finds
# that option set's next proposal. On ResNet-50-like, U65 Dedicated_Sram, a sweep's front
# jumped from 69,344 B (39.22 M cycles) to 146,944 B (28.62 M), the step down from the latter
# found its 1,024 B proposal, and the `vela` cost model's defaults give 87,344 B (29.73 M) at
# the gap's middle, 100,944 B.
PROBE_GAP = 1.25
# A wide gap whose upper end is faster by less than this (in log cycles, 1%) is flat: it is
# ranked by its own area, not as a gap whose cycles drop by PROBE_GAP (`gap_probes`). Flat
# gaps between near-equal schedules far above the smallest ones take the probes otherwise.
FLAT = -math.log(0.99)
# A gap's middle is probed with the options of the nearest few distinct option sets near the
# front on each side of the gap, each once: one that ran at a pool inside the gap has shown
# its schedule there, and one below the gap that ran at a larger pool than the probe's has
# shown that nothing faster fits under it. The points below a gap are often one option set's
# staircase whose next step is far up, while another set near the front lower down has its
# own staircase through the gap: on mobilenet_v2_035_96, U65 Shared_Sram, a sweep's front
# jumped from 49,344 B (880,925 cycles, bricks) to 62,048 B (730,433), and the options of its
# 35,040 B floor (narrow feature maps NHWC) give 52,304 B at 681,959 cycles at the gap's
# middle. A gap none of them fills is left to the sampler.
PROBE_SETS = 3


def _options_key(params: dict[str, Any]) -> tuple:
    """The options that make a point's schedule, without its pool: a `vela` point's Vela
    options, a cascaded point's all but those, the cascader off all but the cascader's too
    (a study asks for every option on every trial, so points of one kind of schedule differ
    in options it ignores: three probes of a U-Net gap took the cascader off, once each)."""
    if producer(params) == "vela":
        return _vela_key(params)
    ignored = _CASCADER_OPTIONS if not params.get("enable_cascader", True) else ()
    return _params_key(
        {k: v for k, v in params.items() if k != POOL and k not in ignored and k[:5] != "vela_"}
    )


def crossings(low: FrozenTrial, high: FrozenTrial) -> list[dict[str, Any]]:
    """The option sets between two cascaded front points: the lower one's options with one
    option taken from the higher one, for each option they differ in (none when either
    point is not cascaded: their options are not comparable). The ends of a gap are often
    two seed kinds a few options apart, and a schedule between them, faster than the lower
    and smaller than the higher, often comes from a mix: on mobilenet_v2_100_224, U55, the
    `vela` model's smallest kind (multi-dimensional striping, stripe factors 2) at 263,872 B
    and its copy-nothing kind (one axis, factors 5) at 358,400 B; with factors 5 and both
    striping axes it schedules 354,992 B at 5.89 M cycles, beating Vela's 361,984 B point."""
    a, b = low.params, high.params
    if (
        not (a.get("enable_cascader", True) and b.get("enable_cascader", True))
        or a.keys() != b.keys()
    ):
        return []
    return [{**a, key: b[key]} for key in sorted(a) if key != POOL and a[key] != b[key]]


def _staircase(params: dict[str, Any]) -> bool:
    """Whether these options have a staircase of cascader proposals a larger pool climbs (the
    cascader off and Vela's compiler do not; Vela's arena is bisected instead)."""
    return params.get("enable_cascader", True) and producer(params) != "vela"


def _nearest_sets(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The first trial of each of the first PROBE_SETS distinct option sets of `trials`."""
    sets: dict[tuple, FrozenTrial] = {}
    for trial in trials:
        if len(sets) < PROBE_SETS:
            sets.setdefault(_options_key(trial.params), trial)
    return list(sets.values())


def gap_probes(
    front: list[FrozenTrial], trials: list[FrozenTrial], low_units: int, high_units: int
) -> list[tuple[float, FrozenTrial, dict[str, Any]]]:
    """For each gap of the `front` of the completed `trials` wider than PROBE_GAP: its area (as
    `_gap`, with its cycles taken to drop by PROBE_GAP at least unless it is FLAT: a budget inside
    it gets the point below however close its ends' cycles are, and by its thin area it would come
    after every narrower gap) and the option sets to try inside it, each beside the trial it came
    from, unless a trial of that option set ran at a pool inside the gap: of the PROBE_SETS nearest
    option sets near the front at or above its upper end, at the aligned pool at the gap's geometric
    middle (in `_cost`'s log scale); then of the PROBE_SETS nearest cascaded ones at or below its
    lower end that ran at a pool under the probe's, at the largest pool PROBE_GAP above the lower
    end's SRAM (what they find there keeps the gap's lower part within PROBE_GAP, and it is as far
    up their staircases as that allows: at the middle they can stop just above the lower end and
    leave the rest of the gap as wide; on the person detector, U65 Shared_Sram, a front stepped from
    76,432 B to Vela's 105,984 B, and the options below it, copying nothing, give 75,792 B at the
    middle and 91,808 B there); then the `crossings` of its two ends, at the largest pool below the
    upper end's SRAM. An option set run before costs only a schedule there; a crossing is new
    options, a cascader run.

    A narrower step whose cycles drop by more than PROBE_GAP (a cliff) gets those crossings
    alone, ranked as a gap PROBE_GAP wide (by its thin area it would come after every step):
    a budget just under its top gets the slow point, and neither end's staircase crosses it
    (a step down from the top finds its options' next proposal, the foot's steps up land
    past it). On U-Net 128, U55 Shared_Sram, a sweep's front fell from 545,584 B (14.64 M
    cycles; both axes striped, factors 2) to 558,896 B (8.79 M; one axis, factors 5, plans
    of 14 parts); the foot's options on one axis schedule 548,864 B at 9.66 M. So does a
    cliff spread over several narrower steps (slow schedules creeping up to a fast one),
    crossed from its foot: the lowest front point less than PROBE_GAP below the fast one and
    slower than it by more than PROBE_GAP."""
    near = sorted((_cost(t), t.number, t) for t in near_front(trials))
    probes = []
    ends = sorted((_cost(t), t.number, t) for t in front)
    wide = math.log(PROBE_GAP)
    for ((sa, ca), _, low), ((sb, cb), _, high) in itertools.pairwise(ends):
        units = round(math.exp((sa + sb) / 2) / SRAM_ALIGN) - 1
        below = _below(high)
        low_sram = low.user_attrs["metrics"]["sram_used_bytes"]
        reach = min(below, int(low_sram * PROBE_GAP) // SRAM_ALIGN)
        wide_gap = sb - sa > wide
        if not (wide_gap or ca - cb > wide) or not low_units <= units <= below <= high_units:
            continue
        tries = [(low, {**mix, POOL: below}) for mix in crossings(low, high)]
        area = wide * (ca - cb)  # a cliff
        if wide_gap:
            uppers = [origin for (sram, _), _, origin in near if sram >= sb]
            lowers = [
                o
                for (s, _), _, o in reversed(near)
                if s <= sa and o.params[POOL] < reach and _staircase(o.params)
            ]
            origins: dict[tuple, tuple[FrozenTrial, int]] = {}
            for side, pool in ((uppers, units), (lowers, reach)):
                for origin in _nearest_sets(side):
                    origins.setdefault(_options_key(origin.params), (origin, pool))
            area = (sb - sa) * (max(ca - cb, wide) if ca - cb > FLAT else ca - cb)
            tries = [
                (origin, {**origin.params, POOL: pool}) for origin, pool in origins.values()
            ] + tries
        probes += _not_run_inside(trials, sa, sb, area, tries)
    for j, ((sb, cb), _, high) in enumerate(ends):
        foot = next(
            (i for i in range(j - 1) if sb - ends[i][0][0] <= wide and ends[i][0][1] - cb > wide),
            None,
        )
        below = _below(high)
        if foot is None or not low_units <= below <= high_units:
            continue
        (sa, ca), _, low = ends[foot]
        tries = [(low, {**mix, POOL: below}) for mix in crossings(low, high)]
        probes += _not_run_inside(trials, sa, sb, wide * (ca - cb), tries)
    return probes


def _not_run_inside(
    trials: list[FrozenTrial],
    sa: float,
    sb: float,
    area: float,
    tries: list[tuple[FrozenTrial, dict[str, Any]]],
) -> list[tuple[float, FrozenTrial, dict[str, Any]]]:
    """`tries` (origin, parameters) as probes of `area`, but those whose option set a trial ran
    at a pool strictly between two SRAMs (`_cost`'s log scale): it has shown its schedule
    there."""
    inside = {
        _options_key(t.params)
        for t in trials
        if sa < math.log((t.params[POOL] + 1) * SRAM_ALIGN) < sb
    }
    return [(area, origin, p) for origin, p in tries if _options_key(p) not in inside]


def producer(params: dict[str, Any]) -> str:
    """Who makes the point of these trial parameters: a study of both producers asks for it;
    a study of Vela's alone asks for Vela's options only."""
    return params.get("producer") or ("vela" if "vela_optimise" in params else "cascader")


def _vela_key(params: dict[str, Any]) -> tuple:
    """A `vela` point's options (optimise, disabled features, allocator), without its pool and
    the cascader options a study of both producers also asks for (Vela ignores them)."""
    return tuple(sorted((k, v) for k, v in params.items() if k.startswith("vela_")))


def _taken_params(trial: FrozenTrial) -> dict[str, Any]:
    return trial.system_attrs.get("fixed_params") or trial.params


# A pair of `vela` trials whose pools are at most this ratio apart is not split (a 1.5x step
# of Vela's ladder is split four times at most). Ethos-U85 schedules of mobilenet_like_96
# change every 1-3% of arena, yet splitting to 1.02 matched no more of Vela's points of a
# 1/8-octave arena sweep, over seven U85 models and sizes: the finer pairs took trials from
# the wider ones.
BISECT_RATIO = 1.05


def _result(trial: FrozenTrial) -> tuple:
    metrics = trial.user_attrs["metrics"]
    return metrics.get("sram_used_bytes"), metrics.get("total_cycles")


def bisections(
    trials: list[FrozenTrial], low_units: int, high_units: int
) -> list[tuple[float, FrozenTrial, FrozenTrial, dict[str, Any]]]:
    """The arena bisections of the `vela` points among the taken `trials`: per option set,
    its pools in order; between two adjacent ones run by completed trials whose results (SRAM
    used, cycles) differ and whose pools are more than BISECT_RATIO apart, the aligned pool at
    their geometric middle with the lower trial's parameters. Each as (log of the pools'
    ratio, lower trial, upper trial, parameters). A pair with a running or waiting trial of
    its options between them is being split already."""
    pools: dict[tuple, dict[int, FrozenTrial]] = {}
    for t in trials:
        params = _taken_params(t)
        if producer(params) != "vela":
            continue
        at = pools.setdefault(_vela_key(params), {})
        kept = at.get(params[POOL])
        if kept is None or (kept.state != TrialState.COMPLETE and t.state == TrialState.COMPLETE):
            at[params[POOL]] = t
    found = []
    for at in pools.values():
        for (a, low), (b, high) in itertools.pairwise(sorted(at.items())):
            if not low.state == high.state == TrialState.COMPLETE:
                continue
            middle = round(math.sqrt(a * b))
            if _result(low) == _result(high) or b <= a * BISECT_RATIO or not a < middle < b:
                continue
            if low_units <= middle <= high_units:
                found.append((math.log(b / a), low, high, {**low.params, POOL: middle}))
    return found


def vela_refinements(
    trials: list[FrozenTrial], front: list[FrozenTrial], low_units: int, high_units: int
) -> list[tuple[str, FrozenTrial, dict[str, Any]]]:
    """The `vela` refinements of the taken `trials` in the order they are taken (see the
    module docstring), each with its system attr and origin trial: the `bisections` just
    below a `front` point and each option set's pool at the bottom of the range (from its
    smallest pool, when that trial is near the front), the widest first; the `steps` down
    from the front's `vela` points; the other bisections, the widest first. Some may have
    been taken already."""
    completed = [t for t in trials if t.state == TrialState.COMPLETE]
    on_front = {t.number for t in front}
    near = {t.number for t in near_front(completed)}
    pairs = sorted(bisections(trials, low_units, high_units), key=lambda b: -b[0])
    smallest: dict[tuple, FrozenTrial] = {}
    for t in trials:
        params = _taken_params(t)
        key = _vela_key(params)
        if producer(params) == "vela" and (
            key not in smallest or params[POOL] < _taken_params(smallest[key])[POOL]
        ):
            smallest[key] = t
    bottoms = [
        (math.log(t.params[POOL] / low_units), t, {**t.params, POOL: low_units})
        for t in smallest.values()
        if t.number in near and t.params[POOL] > low_units * BISECT_RATIO
    ]
    below = [(w, low, p) for w, low, high, p in pairs if high.number in on_front] + bottoms
    ordered = [(BISECT_OF, t, p) for _, t, p in sorted(below, key=lambda b: -b[0])]
    ordered += [
        (STEP_OF, t, steps(t, low_units, high_units)[0])
        for t in front
        if producer(t.params) == "vela"
    ]
    ordered += [(BISECT_OF, low, p) for _, low, high, p in pairs if high.number not in on_front]
    return [(attr, t, p) for attr, t, p in ordered if p is not None]


def next_step(
    study: Study, trial: FrozenTrial, low_units: int, high_units: int, sole_asker: bool = False
) -> tuple[str, int, dict[str, Any]] | None:
    """The refinement no trial has taken yet into the front's largest gap: a gap probe
    (`gap_probes`) or, on a tie after the probes, a step from a point near the front (ties:
    the smaller SRAM, down before up): a gap's few probes try its middle, where steps from
    near-front staircases could spend every trial crawling into it (on U-Net 128, U65, one
    such staircase, 0.6-4% slower than the point below the gap, took 25 of a sweep's 26
    steps); or, when the gap its pool lands in (the rectangle
    just below the pool) is larger, the first of the `vela_refinements` not taken (a `vela`
    point's step down is one of those); with the system attr that marks it (STEP_OF,
    PROBE_OF or BISECT_OF) and its origin trial. None while another trial runs: a trial is
    RUNNING before its sampler is asked, so of two processes choosing at once the later one sees
    the other and leaves the refinements alone, and none is ever taken twice. A
    `sole_asker` (the one process asking every trial of the study, dse.coordinator) steps
    while its own trials are scored: their parameters are stored before the next ask."""
    trials = study.get_trials(deepcopy=False, states=_TAKEN)
    taken = set()
    for t in trials:
        if t.state == TrialState.RUNNING and t.number != trial.number and not sole_asker:
            return None
        taken.add(_params_key(_taken_params(t)))
    completed = [t for t in trials if t.state == TrialState.COMPLETE]
    front_trials = pareto_front(study, completed)
    front = sorted(map(_cost, front_trials))
    srams = [s for s, _ in front]
    candidates = [
        (gap, PROBE_OF, origin, params)
        for gap, origin, params in gap_probes(front_trials, completed, low_units, high_units)
    ]
    candidates += [
        (_gap(front, srams, _cost(origin)[0], bool(up)), STEP_OF, origin, params)
        for origin in _schedules(near_front(completed))
        if producer(origin.params) != "vela"
        for up, params in enumerate(steps(origin, low_units, high_units))
    ]
    best: tuple[float, str, int, dict[str, Any]] | None = None
    for gap, attr, origin, params in candidates:
        if params is None or _params_key(params) in taken:
            continue
        if best is None or gap > best[0]:
            best = (gap, attr, origin.number, params)
    for attr, origin, params in vela_refinements(trials, front_trials, low_units, high_units):
        if _params_key(params) not in taken:
            lands = _gap(front, srams, math.log((params[POOL] + 1) * SRAM_ALIGN), False)
            if best is None or lands > best[0]:
                best = (lands, attr, origin.number, params)
            break
    return None if best is None else best[1:]


def floor_units(study: Study) -> int | None:
    """The smallest SRAM, in pool units, any completed trial's schedule used, fitting or not:
    no option set tried has a smaller schedule (a point chooses the largest proposal under
    its pool and, when none is under it, its smallest), so a pool below it cannot fit."""
    used = [
        t.user_attrs["metrics"]["sram_used_bytes"]
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.user_attrs.get("metrics", {}).get("sram_used_bytes") is not None
    ]
    return -(-min(used) // SRAM_ALIGN) if used else None


def above_floor(units: int, floor: int | None, low_units: int, high_units: int) -> int:
    """A sampled pool below the floor moved above it: [low, floor) maps onto [floor, high]
    in log scale, keeping the sampler's order and spread (no draw is spent on a pool that
    cannot fit, and pools just above the floor, where a front starts, stay dense)."""
    if floor is None or units >= floor or floor >= high_units or floor <= low_units:
        return units
    share = math.log(max(units, low_units) / low_units) / math.log(floor / low_units)
    return min(high_units, max(floor, round(floor * (high_units / floor) ** share)))


class FrontStepSampler(BaseSampler):
    """Wraps a sampler: trials the wrapped sampler would fill, but one in STEP_CYCLE, become step
    trials while there is a step to take (see the module docstring); everything else is the
    wrapped sampler's, with pools below the study's floor moved above it (`above_floor`).
    Trials with fixed parameters (seeds, grid points, retries) are left alone."""

    def __init__(
        self, base: BaseSampler, low_units: int, high_units: int, sole_asker: bool = False
    ) -> None:
        self.base = base
        self.low_units = low_units
        self.high_units = high_units
        self.sole_asker = sole_asker

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        if not trial.system_attrs.get("fixed_params") and trial.number % STEP_CYCLE:
            found = next_step(study, trial, self.low_units, self.high_units, self.sole_asker)
            if found is not None:
                attr, origin, params = found
                # optuna.Trial reads the fixed parameters right after this hook, from the same
                # frozen trial; the storage keeps them for a retry of this trial.
                storage = study._storage
                storage.set_trial_system_attr(trial._trial_id, "fixed_params", params)
                storage.set_trial_system_attr(trial._trial_id, attr, origin)
                trial.system_attrs["fixed_params"] = params
                trial.system_attrs[attr] = origin
        self.base.before_trial(study, trial)

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        params = self.base.sample_relative(study, trial, search_space)
        if POOL in params:
            params[POOL] = above_floor(
                params[POOL], floor_units(study), self.low_units, self.high_units
            )
        return params

    def sample_independent(
        self, study: Study, trial: FrozenTrial, name: str, distribution: BaseDistribution
    ) -> Any:
        value = self.base.sample_independent(study, trial, name, distribution)
        if name == POOL:
            value = above_floor(value, floor_units(study), self.low_units, self.high_units)
        return value

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()


def with_front_steps(
    sampler: BaseSampler, low_units: int, high_units: int, sole_asker: bool = False
) -> FrontStepSampler:
    """`sampler` with front refinement (once: a continued study's sampler may have it)."""
    if isinstance(sampler, FrontStepSampler):
        sampler = sampler.base
    return FrontStepSampler(sampler, low_units, high_units, sole_asker)
