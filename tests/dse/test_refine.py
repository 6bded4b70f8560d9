"""Front refinement: sampler trials that step along a front point's SRAM staircase."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from cascader.testing.networks import mobilenet_like
from dse.cli import main
from dse.evaluators import make_evaluator
from dse.front import pareto_front
from dse.objective import TrialRecorder
from dse.refine import (
    BISECT_OF,
    POOL,
    PROBE_GAP,
    PROBE_OF,
    STEP_OF,
    above_floor,
    bisections,
    crossings,
    floor_units,
    gap_probes,
    near_front,
    next_step,
    steps,
    vela_refinements,
)
from dse.space import SRAM_ALIGN, DesignPoint, SearchSpace
from dse.study import StudySettings, directions, model_sha256, open_storage

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def _trial(
    used: int, cascader: bool = True, cycles: int = 1000, plan: int = 10, pool: int | None = None
) -> optuna.trial.FrozenTrial:
    units = -(-(used if pool is None else pool) // 16)
    return optuna.trial.create_trial(
        values=[float(cycles), float(used)],
        params={"sram_units": units, "enable_cascader": cascader, "max_plan_size": plan},
        distributions={
            "sram_units": IntDistribution(16, 65536, log=True),
            "enable_cascader": CategoricalDistribution([True, False]),
            "max_plan_size": CategoricalDistribution([2, 4, 6, 10]),
        },
        user_attrs={
            "metrics": {"sram_used_bytes": used, "total_cycles": cycles, "fits": True},
            "config": {"sram_pool_bytes": used},
        },
    )


def test_steps_go_just_below_and_a_little_above_the_sram_used() -> None:
    down, up = steps(_trial(50_000), low_units=16, high_units=65536)
    assert down == {"sram_units": 3124, "enable_cascader": True, "max_plan_size": 10}
    assert down["sram_units"] * 16 < 50_000 <= (down["sram_units"] + 1) * 16
    assert up["sram_units"] * 16 >= 50_000 * 33 / 32
    assert up["sram_units"] * 16 - 16 < 50_000 * 33 / 32
    assert up.keys() == down.keys()


def test_a_step_that_found_nothing_new_steps_up_twice_as_far() -> None:
    """A step trial asked for 51,200 B and got the 50,000 B schedule back: its step up asks
    for 50,000 + 2 x 1,200 B; a sampled trial's step up goes just past its pool, or 1/32
    past what it used when that is further."""
    stepped = _trial(50_000)
    stepped.params["sram_units"] = 3200
    stepped.system_attrs[STEP_OF] = 0
    _, up = steps(stepped, low_units=16, high_units=65536)
    assert up["sram_units"] == (50_000 + 2 * 1_200) // 16
    sampled = _trial(50_000)
    sampled.params["sram_units"] = 3300
    assert steps(sampled, 16, 65536)[1]["sram_units"] == 3301
    sampled.params["sram_units"] = 3130
    assert steps(sampled, 16, 65536)[1]["sram_units"] == -(-round(50_000 * 33 / 32) // 16)


def test_no_steps_without_the_cascader_or_outside_the_space() -> None:
    assert steps(_trial(50_000, cascader=False), low_units=16, high_units=65536) == (None, None)
    up = {"sram_units": 17, "enable_cascader": True, "max_plan_size": 10}
    assert steps(_trial(256), low_units=16, high_units=65536) == (None, up)
    assert steps(_trial(256), low_units=18, high_units=65536) == (None, None)
    down = {"sram_units": 65535, "enable_cascader": True, "max_plan_size": 10}
    assert steps(_trial(1 << 20), low_units=16, high_units=65536) == (down, None)


def test_no_step_down_from_the_smallest_proposal() -> None:
    """A point on its options' first proposal would only find that one again below it."""
    first = _trial(50_000)
    first.user_attrs["metrics"]["cascader"] = {"chosen_index": 0}
    down, up = steps(first, low_units=16, high_units=65536)
    assert down is None and up == steps(_trial(50_000), 16, 65536)[1]
    second = _trial(50_000)
    second.user_attrs["metrics"]["cascader"] = {"chosen_index": 1}
    assert steps(second, 16, 65536) == steps(_trial(50_000), 16, 65536)


def test_the_largest_gap_of_the_front_is_stepped_into_first() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"])
    # (SRAM, cycles): a large gap (narrower than PROBE_GAP) between the first two points, a
    # small one after.
    for used, cycles in ((10_000, 9_000), (12_000, 1_000), (12_100, 990)):
        study.add_trial(_trial(used, cycles=cycles))
    running = study.ask()
    attr, origin, params = next_step(study, study.trials[-1], low_units=16, high_units=65536)
    # The first point's step up and the second's step down both enter the large gap; the
    # smaller SRAM goes first.
    assert (attr, origin) == (STEP_OF, 0)
    assert params == steps(study.trials[0], 16, 65536)[1]
    # Another process's running trial holds every step back.
    assert next_step(study, study.trials[0], low_units=16, high_units=65536) is None
    study.tell(running, [5.0, 5.0])


def test_a_wide_gap_is_probed_before_it_is_stepped_into() -> None:
    """Steps and probes entering the same gap tie on its area: the probes go first."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    for used, cycles in ((10_000, 9_000), (40_000, 1_000)):
        study.add_trial(_trial(used, cycles=cycles, pool=used))
    attr, origin, params = next_step(study, study.ask(), low_units=16, high_units=65536)
    middle = round(math.sqrt((10_000 + 16) * (40_000 + 16)) / 16) - 1
    assert (attr, origin, params[POOL]) == (PROBE_OF, 1, middle)


def test_a_wide_gap_of_nearly_equal_cycles_is_probed_before_a_deeper_narrow_one() -> None:
    """A gap wider than PROBE_GAP is ranked as if its cycles dropped by PROBE_GAP at least: a
    budget inside it gets the point below however close the two ends' cycles are, so it is
    probed before a step into a narrower gap of a larger area. A FLAT one (its upper end
    less than 1% faster) keeps its own area."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    for used, cycles, plan in ((10_000, 4_500, 2), (11_000, 4_000, 4), (20_000, 3_940, 10)):
        study.add_trial(_trial(used, cycles=cycles, plan=plan, pool=used))
    attr, origin, params = next_step(study, study.ask(), low_units=16, high_units=65536)
    middle = round(math.sqrt((11_000 + 16) * (20_000 + 16)) / 16) - 1
    assert (attr, origin, params[POOL]) == (PROBE_OF, 2, middle)
    done = study.trials[:3]
    (area, *_), *_ = gap_probes(pareto_front(study, done), done, 16, 65536)
    assert math.isclose(area, (math.log(20_016) - math.log(11_016)) * math.log(PROBE_GAP))
    flat = [*done[:2], _trial(20_000, cycles=3_990, plan=10, pool=20_000)]
    (area, *_), *_ = gap_probes(pareto_front(study, flat), flat, 16, 65536)
    assert math.isclose(area, (math.log(20_016) - math.log(11_016)) * math.log(4_001 / 3_991))


def test_steps_start_from_each_schedule_once() -> None:
    """Trials of one option set that found the same schedule at different pools step as one:
    up from the largest pool, which showed nothing else fits up to there."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    for pool in (10_000, 10_800, 10_400):
        study.add_trial(_trial(10_000, cycles=9_000, pool=pool))
    study.add_trial(_trial(12_000, cycles=1_000))
    attr, origin, params = next_step(study, study.ask(), low_units=16, high_units=65536)
    assert (attr, origin) == (STEP_OF, 1)
    assert params[POOL] == steps(study.trials[1], 16, 65536)[1][POOL] == 10_801 // 16 + 1


def test_a_wide_gap_is_probed_at_its_middle_and_below_its_top_end() -> None:
    """Each of the nearest PROBE_SETS option sets near the front above a gap wider than
    PROBE_GAP at the gap's geometric middle (then those below it, PROBE_GAP above its lower
    end), then the lower end's options with each option the upper end's differ in, just
    below the upper end; none that ran inside the gap."""
    plans = (2, 4, 6, 10)
    trials = [_trial(10_000, cycles=9_000, cascader=False), _trial(11_000, cycles=8_900)]
    trials += [_trial(40_000 + 1_000 * i, cycles=1_000 - i, plan=p) for i, p in enumerate(plans)]
    front = pareto_front(optuna.create_study(directions=["minimize"] * 2), trials)
    probes = gap_probes(front, trials, low_units=16, high_units=65536)
    # Only the 11,000..40,000 B gap is wide; of the four option sets above it, the nearest
    # three (below it, the cascader off has no staircase and the 11,000 B point's options ran
    # at a pool just inside the gap); and the 11,000 B point's options with the 40,000 B
    # point's plan size.
    middle = round(math.sqrt((11_000 + 16) * (40_000 + 16)) / 16) - 1
    assert [p[2] for p in probes] == [
        *({"sram_units": middle, "enable_cascader": True, "max_plan_size": p} for p in plans[:3]),
        {"sram_units": (40_000 - 1) // 16, "enable_cascader": True, "max_plan_size": 2},
    ]
    area = (math.log(40_016) - math.log(11_016)) * (math.log(8_901) - math.log(1_001))
    assert [p[1] for p in probes] == [*trials[2:5], trials[1]]
    assert all(math.isclose(p[0], area) for p in probes)
    # An option set that ran at a pool inside the gap has shown its schedule there.
    tried = _trial(11_000, cycles=9_500, plan=4, pool=20_000)
    probes = gap_probes(front, [*trials, tried], 16, 65536)
    assert [p[2]["max_plan_size"] for p in probes] == [2, 6, 2]


def test_a_wide_gap_is_probed_with_the_options_of_the_points_below_it() -> None:
    """A staircase below the gap whose next step is far up leaves the gap to another option
    set lower down, whose own steps up are off the front: its options are probed PROBE_GAP
    above the gap's lower end (the largest pool whose point keeps the gap's lower part within
    PROBE_GAP), unless it ran at a pool past there (nothing faster fits there)."""
    low = _trial(11_000, cycles=8_900, plan=2)
    off_front = _trial(9_000, cycles=9_100, plan=4)
    high = _trial(40_000, cycles=1_000, plan=10)
    front = pareto_front(optuna.create_study(directions=["minimize"] * 2), [low, off_front, high])
    reach = int(11_000 * PROBE_GAP) // 16
    probes = gap_probes(front, [low, off_front, high], 16, 65536)
    assert {"sram_units": reach, "enable_cascader": True, "max_plan_size": 4} in [
        p[2] for p in probes
    ]
    big_pool = _trial(9_000, cycles=9_100, plan=4, pool=reach * 16)
    probes = gap_probes(front, [low, big_pool, high], 16, 65536)
    assert all(p[2]["max_plan_size"] != 4 for p in probes)


def test_a_cliff_is_probed_with_the_crossings_of_its_ends() -> None:
    """A narrow SRAM step whose cycles drop by more than PROBE_GAP is probed just below its
    upper end with the lower end's options, each taking one option of the upper end's, ranked
    as a gap PROBE_GAP wide; a flatter narrow step is not probed."""
    low, high = _trial(10_000, cycles=3_000, plan=2), _trial(10_400, cycles=1_000, plan=10)
    front = pareto_front(optuna.create_study(directions=["minimize"] * 2), [low, high])
    ((area, origin, params),) = gap_probes(front, [low, high], 16, 65536)
    assert origin is low
    assert params == {**low.params, "max_plan_size": 10, "sram_units": (10_400 - 1) // 16}
    assert math.isclose(area, math.log(PROBE_GAP) * (math.log(3_001) - math.log(1_001)))
    flat = _trial(10_400, cycles=2_500, plan=10)
    front = pareto_front(optuna.create_study(directions=["minimize"] * 2), [low, flat])
    assert gap_probes(front, [low, flat], 16, 65536) == []


def _copying(trial: optuna.trial.FrozenTrial, size: int) -> optuna.trial.FrozenTrial:
    """`trial` with an `always_copy_size` option too (a second option a crossing can take)."""
    return optuna.trial.create_trial(
        values=trial.values,
        params={**trial.params, "always_copy_size": size},
        distributions={
            **trial.distributions,
            "always_copy_size": CategoricalDistribution([0, 1024]),
        },
        user_attrs=trial.user_attrs,
    )


def test_a_cliff_spread_over_several_steps_is_crossed_from_its_foot() -> None:
    """Slow points creeping up to a fast one within PROBE_GAP of SRAM: besides the adjacent
    cliff's crossings, the lowest of them (the foot) is crossed with the fast one, just below
    it, ranked by the foot's cycles."""
    foot = _copying(_trial(10_000, cycles=3_000, plan=2), 0)
    creep = _copying(_trial(10_200, cycles=2_900, plan=10), 0)
    top = _copying(_trial(10_400, cycles=1_000, plan=10), 1024)
    front = pareto_front(optuna.create_study(directions=["minimize"] * 2), [foot, creep, top])
    probes = gap_probes(front, [foot, creep, top], 16, 65536)
    below = (10_400 - 1) // 16
    from_foot = [(area, p) for area, origin, p in probes if origin is foot]
    # The foot's options with the top's plan size are the creeping point's, run inside.
    assert [p for _, p in from_foot] == [
        {**foot.params, "always_copy_size": 1024, "sram_units": below}
    ]
    area = math.log(PROBE_GAP) * (math.log(3_001) - math.log(1_001))
    assert math.isclose(from_foot[0][0], area)
    assert [origin for _, origin, _ in probes] == [creep, foot]


def test_points_with_the_cascader_off_differ_only_in_the_options_they_use() -> None:
    """A study asks for every option on every trial: two layer-by-layer points whose unused
    cascader options differ are one option set, probed once."""
    low = _trial(10_000, cycles=9_000, plan=2)
    off = [_trial(40_000, cycles=1_000, cascader=False, plan=p) for p in (4, 6)]
    front = pareto_front(optuna.create_study(directions=["minimize"] * 2), [low, *off])
    probes = gap_probes(front, [low, *off], 16, 65536)
    assert [p[2]["enable_cascader"] for p in probes] == [False, True]


def test_crossings_take_one_option_of_the_upper_end_at_a_time() -> None:
    low, high = _trial(11_000, plan=2), _trial(40_000, plan=10)
    assert crossings(low, high) == [{**low.params, "max_plan_size": 10}]
    assert crossings(low, low) == []
    # The cascader off has no options to mix.
    assert crossings(_trial(256, cascader=False), high) == []


def test_points_near_the_front_step_too() -> None:
    trials = [_trial(10_000, cycles=c) for c in (1_000, 1_030, 1_200)]
    trials.append(_trial(20_000, cycles=900))
    near = near_front(trials)
    assert [t.user_attrs["metrics"]["total_cycles"] for t in near] == [1_000, 1_030, 900]


def test_a_sweep_steps_from_front_points_and_runs_exactly_the_trials_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "--model", str(EXAMPLE), "--trials", "12", "--sram-min", "64KiB"]
    argv += ["--producers", "cascader"]
    code = main([*argv, "--sram-max", "1MiB", "--out", str(tmp_path), "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["trials"] == 12
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(trials) == 12
    stepped = [t for t in trials if STEP_OF in t.system_attrs]
    assert stepped, "no sampler trial stepped along the front"
    by_number = {t.number: t for t in trials}
    for trial in stepped:
        origin = by_number[trial.system_attrs[STEP_OF]]
        assert origin.number < trial.number
        assert trial.params in steps(origin, 1, 1 << 40)
        used = origin.user_attrs["metrics"]["sram_used_bytes"]
        if trial.params["sram_units"] * 16 < used:  # a step down finds a smaller schedule or none
            metrics = trial.user_attrs["metrics"]
            assert not metrics["fits"] or metrics["sram_used_bytes"] < used
    assert len({json.dumps(t.params, sort_keys=True) for t in stepped}) == len(stepped)
    for trial in (t for t in trials if PROBE_OF in t.system_attrs):  # a gap probe: at most
        origin = by_number[trial.system_attrs[PROBE_OF]]  # one option changed
        assert origin.number < trial.number
        changed = {k for k, v in trial.params.items() if origin.params.get(k) != v}
        assert len(changed - {"sram_units"}) <= 1
    for trial in trials:  # a cascaded point says which of how many proposals it scheduled
        cascader = trial.user_attrs["metrics"]["cascader"]
        if trial.params["enable_cascader"]:
            assert 0 <= cascader["chosen_index"] < cascader["proposals"]
        else:
            assert "chosen_index" not in cascader


def test_pools_below_the_smallest_schedule_seen_are_sampled_above_it() -> None:
    """No option set tried has a schedule under the smallest SRAM any trial used, so a
    sampled pool under it moves above it, in order: the bottom of the range to the floor,
    the floor's edge to the top."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    for used in (200_000, 60_000, 90_000):
        study.add_trial(_trial(used))
    floor = floor_units(study)
    assert floor == 3750  # 60,000 B in 16-byte units
    low, high = 16, 65536
    moved = [above_floor(u, floor, low, high) for u in (16, 100, 1000, 3749)]
    assert moved[0] == floor and moved == sorted(moved) and moved[-1] <= high
    assert all(m >= floor for m in moved)
    assert above_floor(3750, floor, low, high) == 3750
    assert above_floor(100, None, low, high) == 100
    assert floor_units(optuna.create_study(directions=["minimize", "minimize"])) is None


def test_spine_seeds_start_at_the_smallest_floor_and_take_kinds_that_fit() -> None:
    """With each seed kind's floor probed, no spine seed sits on a pool its kind is known
    not to fit, and the spine spans the smallest floor to the top of the range."""
    space = SearchSpace(16 * 1024, 4 << 20, cascader_optional=True)
    kinds = space.seed_kinds()
    floors = [1 << 20, 1 << 20, 900 * 1024, 950 * 1024, 2 << 20, None, 3 << 20, 3 << 20]
    floors += [1 << 21] * (len(kinds) - len(floors))
    seeds = space.seed_points(6, floors)
    pools = [s["sram_units"] * 16 for s in seeds]
    assert pools[0] == 900 * 1024 and pools[-1] == 4 << 20 and pools == sorted(set(pools))
    for seed, pool in zip(seeds, pools, strict=True):
        (index,) = [
            i
            for i, k in enumerate(kinds)
            if space.params_of(replace(k, sram_pool_bytes=pool)) == seed
        ]
        assert floors[index] is not None and floors[index] <= pool
    # Unprobed, the spine spans the whole range in turn, as before.
    unprobed = space.seed_points(6)
    assert unprobed[0]["sram_units"] * 16 == 16 * 1024


def test_a_gap_probe_on_a_real_model_fills_the_gap_with_cached_proposals(tmp_path: Path) -> None:
    """On a builder network (U65, Dedicated_Sram), a front of the cascader off at 0 B and the
    `vela` cost model's defaults at 1 MiB is probed at the middle of the gap with the latter's
    options: the probe reuses their proposals and finds a schedule in the gap that beats the
    cascader off; that option set is not probed there again."""
    model = tmp_path / "mobilenet_like.tflite"
    model.write_bytes(mobilenet_like().build())
    settings = StudySettings("model", str(model), model_sha256(model), "ethos-u65-256",
                             "Ethos_U65_High_End", "Dedicated_Sram", None, 256, 4 << 20,
                             ("cycles", "sram"), "default")  # fmt: skip
    space = SearchSpace(settings.sram_min, settings.sram_max, cascader_optional=True)
    evaluate = make_evaluator(settings)
    recorder = TrialRecorder(settings, space)

    def objective(trial: optuna.Trial) -> list[float]:
        point = recorder.start(trial)
        return recorder.finish(trial, point, evaluate(point), 0.0)

    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=False)
    study = optuna.create_study(storage=storage, directions=directions(settings.objectives))
    for point in (DesignPoint(256, enable_cascader=False, buffer_weights=False),
                  DesignPoint(1 << 20, cost_model="vela")):  # fmt: skip
        study.enqueue_trial(space.params_of(point))
    study.optimize(objective, n_trials=2)
    low, high = space.low // SRAM_ALIGN, space.high // SRAM_ALIGN
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    off, vela = (t.user_attrs["metrics"] for t in trials)
    assert off["sram_used_bytes"] == 0 < vela["sram_used_bytes"]
    (probe,) = gap_probes(pareto_front(study, trials), trials, low, high)
    origin, params = probe[1], dict(probe[2])
    middle = math.sqrt(SRAM_ALIGN * (vela["sram_used_bytes"] + SRAM_ALIGN)) - SRAM_ALIGN
    assert origin.number == 1 and abs(params.pop("sram_units") * SRAM_ALIGN - middle) < 16
    assert params == {k: v for k, v in origin.params.items() if k != "sram_units"}
    runs = evaluate.cache["proposals"].misses
    study.enqueue_trial(probe[2])
    study.optimize(objective, n_trials=1)
    assert evaluate.cache["proposals"].misses == runs  # no new cascader run
    found = study.trials[-1].user_attrs["metrics"]
    assert found["fits"] and 0 < found["sram_used_bytes"] < vela["sram_used_bytes"]
    assert found["total_cycles"] < off["total_cycles"]
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    again = gap_probes(pareto_front(study, trials), trials, low, high)
    assert all(not (found["sram_used_bytes"] < p[2]["sram_units"] * SRAM_ALIGN
                    < vela["sram_used_bytes"]) for p in again)  # fmt: skip


# A hand-made `vela` study (Vela's alone, as on Ethos-U85): (optimise, pool) -> (SRAM used,
# cycles) as Vela's compiler would report them; the pools in 16-byte units. Performance at
# 1,280 and 1,536 units gives one schedule; 1,984 units lie 3% above 1,920.
_VELA = {("Performance", 1024): (16_000, 900), ("Performance", 1280): (19_000, 600),
         ("Performance", 1536): (19_000, 600), ("Performance", 1920): (22_000, 500),
         ("Performance", 1984): (24_000, 490), ("Size", 1920): (23_000, 510)}  # fmt: skip


def _vela_study(tmp_path: Path) -> tuple[optuna.Study, SearchSpace]:
    space = SearchSpace(16 * 1024, 4 << 20, producers=("vela",))

    def objective(trial: optuna.Trial) -> list[float]:
        point = space.suggest(trial)
        used, cycles = _VELA[point.vela_optimise, point.sram_pool_bytes // SRAM_ALIGN]
        trial.set_user_attr("config", point.to_json())
        trial.set_user_attr("metrics", {"sram_used_bytes": used, "total_cycles": cycles,
                                        "fits": True, "producer": "vela"})  # fmt: skip
        return [float(cycles), float(used)]

    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=False)
    study = optuna.create_study(storage=storage, directions=["minimize", "minimize"])
    for optimise, units in _VELA:
        point = DesignPoint(units * SRAM_ALIGN, producer="vela", vela_optimise=optimise)
        study.enqueue_trial(space.params_of(point))
    study.optimize(objective, n_trials=len(_VELA))
    return study, space


def test_vela_points_are_refined_by_bisecting_the_arena(tmp_path: Path) -> None:
    """Adjacent pools of one option set whose results differ are split at their geometric
    middle (not pools 3% apart, not one schedule twice); a pair just below a front point and
    the bottom of the range for an option set near the front come first, the widest first,
    then the steps down from front points; nothing taken is proposed again, and an unfinished
    trial between two pools leaves them to it."""
    study, space = _vela_study(tmp_path)
    low, high = space.low // SRAM_ALIGN, space.high // SRAM_ALIGN
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    pool = {t.number: t.params["sram_units"] for t in trials}
    size = next(t for t in trials if t.params["vela_optimise"] == "Size")
    found = bisections(trials, low, high)
    assert [(pool[lo.number], pool[hi.number], p["sram_units"]) for _, lo, hi, p in found] == [
        (1024, 1280, round(math.sqrt(1024 * 1280))),
        (1536, 1920, round(math.sqrt(1536 * 1920))),
    ]
    assert all(p == {**lo.params, "sram_units": p["sram_units"]} for _, lo, _, p in found)
    assert all(math.isclose(w, math.log(1.25)) for w, *_ in found)

    front = pareto_front(study, trials)
    used = [t.user_attrs["metrics"]["sram_used_bytes"] for t in front]
    assert used == [16_000, 19_000, 22_000, 24_000]
    order = [(attr, pool[origin.number], p["vela_optimise"], p["sram_units"])
             for attr, origin, p in vela_refinements(trials, front, low, high)]  # fmt: skip
    assert order == [
        (BISECT_OF, 1920, "Size", low),  # Size is 2% behind the front: the bottom of the range
        (BISECT_OF, 1024, "Performance", 1145),
        (BISECT_OF, 1536, "Performance", 1717),
        # Steps down to just below the SRAM used (none from 16,000 B: below the range).
        (STEP_OF, 1280, "Performance", (19_000 - 1) // SRAM_ALIGN),
        (STEP_OF, 1920, "Performance", (22_000 - 1) // SRAM_ALIGN),
        (STEP_OF, 1984, "Performance", (24_000 - 1) // SRAM_ALIGN),
    ]
    # A `vela` point steps down only, whatever its pool; the cascader's rules are not its.
    assert steps(front[1], low, high) == ({**front[1].params, "sram_units": 1187}, None)

    # The front's gaps are narrower than PROBE_GAP: the bisections are all there is to take.
    assert next_step(study, trials[-1], low, high, sole_asker=True) == (
        BISECT_OF, size.number, {**size.params, "sram_units": low})  # fmt: skip
    study.enqueue_trial({**size.params, "sram_units": low})
    assert next_step(study, trials[-1], low, high, sole_asker=True) == (
        BISECT_OF, trials[0].number, {**trials[0].params, "sram_units": 1145})  # fmt: skip
    # A trial waiting at 1,700 units is splitting 1,536..1,920 already.
    study.enqueue_trial({**trials[0].params, "sram_units": 1700})
    taken = study.get_trials(states=(TrialState.COMPLETE, TrialState.WAITING))
    assert [p["sram_units"] for *_, p in bisections(taken, low, high)] == [1145]
