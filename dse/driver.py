"""Runs trials of a study in this process or in worker processes, with a progress bar."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable

import optuna
from optuna.trial import TrialState
from tqdm import tqdm

from dse.objective import Evaluator, make_objective
from dse.space import SearchSpace
from dse.study import StudySettings, load_settings, open_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)

SAMPLERS = ("default", "nsga2", "tpe", "grid")


def make_sampler(name: str, space: SearchSpace) -> optuna.samplers.BaseSampler | None:
    """None lets Optuna pick its default sampler for the study's directions."""
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler()
    if name == "tpe":
        return optuna.samplers.TPESampler(multivariate=True)
    if name == "grid":
        return optuna.samplers.GridSampler(space.grid())
    return None


def space_of(settings: StudySettings) -> SearchSpace:
    return SearchSpace(settings.sram_min, settings.sram_max)


def finished(study: optuna.Study) -> int:
    states = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def run_trials(study: optuna.Study, evaluate: Evaluator, n_trials: int, progress: bool) -> None:
    """Run `n_trials` trials here; the grid sampler stops by itself once its grid is done."""
    settings = load_settings(study)
    objective = make_objective(settings, space_of(settings), evaluate)
    with tqdm(total=n_trials, disable=not progress, unit="trial", leave=False) as bar:
        study.optimize(
            objective,
            n_trials=n_trials,
            callbacks=[lambda _s, _t: bar.update(1)],
            catch=(),
        )


def _worker_main(
    storage_url: str, study_name: str, sampler_name: str, n_trials: int, make_evaluator: Callable
) -> None:
    storage = open_storage(storage_url)
    study = optuna.load_study(study_name=study_name, storage=storage)
    settings = load_settings(study)
    study.sampler = make_sampler(sampler_name, space_of(settings)) or study.sampler
    run_trials(study, make_evaluator(settings), n_trials, progress=False)


def run_parallel(
    storage_url: str,
    study: optuna.Study,
    sampler_name: str,
    n_trials: int,
    jobs: int,
    make_evaluator: Callable[[StudySettings], Evaluator],
    progress: bool,
) -> None:
    """Split `n_trials` over `jobs` processes sharing the storage; the bar follows the storage."""
    shares = [n_trials // jobs + (i < n_trials % jobs) for i in range(jobs)]
    ctx = multiprocessing.get_context("spawn")
    start = finished(study)
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(storage_url, study.study_name, sampler_name, share, make_evaluator),
        )
        for share in shares
        if share
    ]
    for proc in procs:
        proc.start()
    with tqdm(total=n_trials, disable=not progress, unit="trial", leave=False) as bar:
        while any(p.is_alive() for p in procs):
            time.sleep(0.5)
            bar.update(min(n_trials, finished(study) - start) - bar.n)
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} worker process(es) failed (exit codes {failed})")
