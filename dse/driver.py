"""Runs a study's issued trials in this process or in worker processes, with a progress bar."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import replace

import optuna
from optuna.trial import TrialState
from tqdm import tqdm

from cascader.ir.units import align
from dse.cache_stats import record
from dse.collector import after_evaluation, before_exit
from dse.front import front_progress, pareto_front
from dse.objective import Evaluator, make_objective
from dse.refine import with_front_steps
from dse.space import SRAM_ALIGN, SearchSpace
from dse.study import StudySettings, load_settings, open_storage
from dse.tickets import completed_trials, issue, run_issued

optuna.logging.set_verbosity(optuna.logging.WARNING)

SAMPLERS = ("default", "nsga2", "tpe", "grid")
# A new study's first request spends up to 1/SEED_SHARE of its trials on the seed kinds'
# floors and 1/SPINE_SHARE on the spine across the pool range: the spine does not shrink as
# seed kinds are added (on mobilenet_v2_100_224, U65, five spine seeds over 256 B..4 MiB
# left the 16-64 KiB part of the front, where Vela's points lie, to chance; seven do not).
SEED_SHARE = 4
SPINE_SHARE = 8


def make_sampler(name: str, seed: int | None = None) -> optuna.samplers.BaseSampler | None:
    """None lets Optuna pick its default sampler for the study's directions; with a seed, that
    default (Optuna 5's TPESampler for any number of objectives) is built here, seeded. A
    grid study needs no sampler: its tickets carry every parameter (see dse.tickets.issue)."""
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(multivariate=True, seed=seed)
    if name == "default" and seed is not None:
        return optuna.samplers.TPESampler(seed=seed)
    return None


def space_of(settings: StudySettings) -> SearchSpace:
    return SearchSpace(
        settings.sram_min, settings.sram_max, cascader_optional=settings.source_kind == "model"
    )


def floor_seeds(
    space: SearchSpace, evaluate: Evaluator, count: int
) -> tuple[list[dict], list[int | None]]:
    """The first `count` seed kinds, each at the smallest pool its schedules fit in: probed
    at the lowest pool, where a point that does not fit still reports what its smallest
    schedule needs (the probes are evaluations too, and count in the cache statistics). The
    low end of a front then comes from a few exact trials instead of the sampler's luck
    (random pools rarely land just above a floor). Also returns each probed kind's floor
    (None: not probed, or no schedule), for the spine seeds (SearchSpace.seed_points)."""
    seeds: list[dict] = []
    floors: list[int | None] = []
    for kind in space.seed_kinds()[:count]:
        probe = evaluate(replace(kind, sram_pool_bytes=space.low))
        after_evaluation()
        need = probe.sram_used_bytes
        pool = None if need is None else space.low if probe.fits else align(need)
        floors.append(pool)
        if pool is not None and pool <= space.high:
            seeds.append(space.params_of(replace(kind, sram_pool_bytes=pool)))
    return seeds, floors


def issue_trials(
    study: optuna.Study, n_trials: int, by: str, evaluate: Evaluator | None = None
) -> int:
    """Enqueue this command's share of trials: for a grid study, unvisited grid points; for a
    new study, seed points first: with `evaluate`, each seed kind at its floor (see
    floor_seeds), then points spread over the pool range (see SearchSpace.seed_points)."""
    settings = load_settings(study)
    space = space_of(settings)
    if settings.sampler == "grid":
        return issue(study, n_trials, space.grid_points(), by)
    new = not study.trials
    count = n_trials // SEED_SHARE if new else 0
    seeds, floors = floor_seeds(space, evaluate, count) if evaluate is not None else ([], [])
    spine = max(count - len(seeds), n_trials // SPINE_SHARE if new else 0)
    seeds += [p for p in space.seed_points(spine, floors) if p not in seeds]
    return issue(study, n_trials, None, by, seeds)


def run_trials(
    study: optuna.Study, evaluate: Evaluator, total: int, progress: bool, seed: int | None = None
) -> int:
    """Run issued trials here until none is left; returns how many this process completed."""
    settings = load_settings(study)
    space = space_of(settings)
    if settings.sampler != "grid":
        base = make_sampler(settings.sampler, seed) or study.sampler
        study.sampler = with_front_steps(base, space.low // SRAM_ALIGN, space.high // SRAM_ALIGN)
    objective = make_objective(settings, space, evaluate)
    done = 0
    front = pareto_front(study) if progress else []

    def count(_study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        nonlocal done, front
        if trial.state == TrialState.COMPLETE:
            done += 1
            if progress:
                front = pareto_front(study, [*front, trial])
                bar.set_postfix_str(front_progress(front), refresh=False)
            bar.update(1)

    with tqdm(total=total, disable=not progress, unit="trial", leave=False) as bar:
        try:
            run_issued(study, objective, [count])
        finally:
            record(study, getattr(evaluate, "cache", {}))
    return done


def _worker_main(
    storage_url: str, study_name: str, make_evaluator: Callable, seed: int | None
) -> None:
    """A `--jobs` process: it ends when its trials do, and the sweep waits for it, so it
    leaves as the `dse` script does (`dse.collector.before_exit`)."""
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage_url))
    run_trials(study, make_evaluator(load_settings(study)), 0, progress=False, seed=seed)
    before_exit()


def run_parallel(
    storage_url: str,
    study: optuna.Study,
    total: int,
    jobs: int,
    make_evaluator: Callable[[StudySettings], Evaluator],
    progress: bool,
    seed: int | None = None,
) -> None:
    """Run the issued trials in `jobs` processes sharing the storage; the bar follows it.
    With a seed, process k seeds its sampler with seed + k (the same seed in every process
    would draw the same points)."""
    ctx = multiprocessing.get_context("spawn")
    start = len(completed_trials(study))
    seeds = [None if seed is None else seed + k for k in range(jobs)]
    procs = [
        ctx.Process(target=_worker_main, args=(storage_url, study.study_name, make_evaluator, s))
        for s in seeds
    ]
    for proc in procs:
        proc.start()
    with tqdm(total=total, disable=not progress, unit="trial", leave=False) as bar:
        while any(p.is_alive() for p in procs):
            time.sleep(0.5)
            finished = min(total, len(completed_trials(study)) - start)
            if progress and finished != bar.n:
                bar.set_postfix_str(front_progress(pareto_front(study)), refresh=False)
            bar.update(finished - bar.n)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} worker process(es) failed (exit codes {failed})")
