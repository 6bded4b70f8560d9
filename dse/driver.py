"""Runs a study's issued trials in this process or in worker processes, with a progress bar."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import optuna
from tqdm import tqdm

from cascader.estimate import Estimate
from cascader.ir.units import align
from dse.coordinator import StudyRun, run_studies, study_run
from dse.front import front_progress, pareto_front
from dse.mean_rows import has_row_sum_mean
from dse.scoring_pool import ScoringPool
from dse.space import DesignPoint, SearchSpace
from dse.study import StudySettings, load_settings
from dse.tickets import issue

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
    model = settings.source_kind == "model"
    return SearchSpace(
        settings.sram_min,
        settings.sram_max,
        cascader_optional=model,
        producers=settings.producers,
        row_sum_mean=model
        and "cascader" in settings.producers
        and has_row_sum_mean(settings.source_path, settings.source_sha256),
    )


# Scores a list of points (a study's floor probes), in order; may score them in parallel.
ScoreAll = Callable[[list[DesignPoint]], list[Estimate]]


def probe_points(space: SearchSpace, count: int) -> list[DesignPoint]:
    """The floor probes of a new study's first `count` seed kinds: each at the lowest pool."""
    return [replace(kind, sram_pool_bytes=space.low) for kind in space.seed_kinds()[:count]]


def floor_seeds(
    space: SearchSpace, score_all: ScoreAll, count: int
) -> tuple[list[dict], list[int | None]]:
    """The first `count` seed kinds, each at the smallest pool its schedules fit in: probed
    at the lowest pool, where a point that does not fit still reports what its smallest
    schedule needs (the probes are evaluations too, and count in the cache statistics). The
    low end of a front then comes from a few exact trials instead of the sampler's luck
    (random pools rarely land just above a floor). Also returns each probed kind's floor
    (None: not probed, or no schedule), for the spine seeds (SearchSpace.seed_points)."""
    seeds: list[dict] = []
    floors: list[int | None] = []
    kinds = space.seed_kinds()[:count]
    probes = score_all(probe_points(space, count))
    for kind, probe in zip(kinds, probes, strict=True):
        need = probe.sram_used_bytes
        pool = None if need is None else space.low if probe.fits else align(need)
        floors.append(pool)
        if pool is not None and pool <= space.high:
            seeds.append(space.params_of(replace(kind, sram_pool_bytes=pool)))
    return seeds, floors


def issue_trials(
    study: optuna.Study,
    n_trials: int,
    by: str,
    score_all: ScoreAll | None = None,
    seeded_as: int | None = None,
) -> int:
    """Enqueue this command's share of trials: for a grid study, unvisited grid points; for a
    new study, seed points first: Vela's compiler at its own dense-sweep arena sizes
    (SearchSpace.vela_seeds: each a compile of a fraction of a second; issued on top of
    `n_trials`, so a union study's explorer keeps every trial asked for), then with
    `score_all`, each cascader seed kind at its floor (see floor_seeds), then points spread
    over the pool range (see SearchSpace.seed_points). The seed counts are those of a study
    of `seeded_as` trials (default `n_trials`: a workload issues part of a study's trials
    first, seeded as the whole)."""
    settings = load_settings(study)
    space = space_of(settings)
    if settings.sampler == "grid":
        return issue(study, n_trials, space.grid_points(), by)
    new = not study.trials and n_trials > 0
    vela = space.vela_seeds() if new else []  # on top of the trials asked: they are Vela's
    seeded_as = n_trials if seeded_as is None else seeded_as
    count = seeded_as // SEED_SHARE if new else 0
    kinds, floors = floor_seeds(space, score_all, count) if score_all is not None else ([], [])
    seeds = vela + kinds
    spine = max(count - len(kinds), seeded_as // SPINE_SHARE if new else 0)
    seeds += [p for p in space.seed_points(spine, floors) if p not in seeds]
    return issue(study, n_trials + len(vela), None, by, seeds)


def run_sweep(
    study: optuna.Study,
    total: int,
    pool: ScoringPool,
    progress: bool,
    seed: int | None = None,
    sole_asker: bool = True,
) -> int:
    """Run the study's issued trials from this process, scored by `pool` (see
    dse.coordinator); the bar follows the front. Returns how many this run completed.
    `sole_asker`: no other process runs trials of the study now (`dse worker` cannot know)."""
    settings = load_settings(study)
    space = space_of(settings)
    sampler = make_sampler(settings.sampler, seed) if settings.sampler != "grid" else None
    run = study_run(study, settings, space, sampler, sole_asker)
    front = pareto_front(study) if progress else []
    with tqdm(total=total, disable=not progress, unit="trial", leave=False) as bar:

        def count(_run: StudyRun, trial: optuna.trial.FrozenTrial) -> None:
            nonlocal front
            if progress:
                front = pareto_front(study, [*front, trial])
                bar.set_postfix_str(front_progress(front), refresh=False)
            bar.update(1)

        run_studies([run], pool, on_done=count)
    return run.done
