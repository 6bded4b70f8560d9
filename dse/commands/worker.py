"""`dse worker`: join a study (typically on a shared PostgreSQL server) and run its trials."""

from __future__ import annotations

import argparse
import sys

from dse.coordinator import run_studies, study_run
from dse.driver import issue_trials, run_sweep, space_of
from dse.evaluators import make_evaluator
from dse.gc_policy import collected_between_evaluations
from dse.objective import Evaluator
from dse.scoring_pool import ScoringPool, settings_key
from dse.study import load_settings, load_study, open_storage
from dse.tickets import completed_trials, requested_trials, worker_id
from dse.workload import workload_studies


def run(args: argparse.Namespace) -> int:
    with collected_between_evaluations():
        return _work(args)


def _work(args: argparse.Namespace) -> int:
    storage = open_storage(args.storage, create=False)
    if args.workload is not None:
        return _work_on_workload(args, storage)
    study = load_study(storage, args.study)
    evaluate = make_evaluator(load_settings(study))  # checks the model before touching the study
    issued = issue_trials(study, args.trials, by="worker") if args.trials else 0
    with ScoringPool(1, make_evaluator, lambda _settings: evaluate) as pool:
        done = run_sweep(study, issued, pool, sys.stderr.isatty(), sole_asker=False)
    print(
        f"worker {worker_id()}: ran {done} trial(s); study {args.study}: "
        f"{len(completed_trials(study))} of {requested_trials(study)} requested trials complete"
    )
    return 0


def _work_on_workload(args: argparse.Namespace, storage) -> int:
    """Take the tickets of every study of the workload, studies in turn; each study's
    evaluator is made in this process when it first scores one of its points."""
    studies = workload_studies(storage, args.workload)
    made: dict[str, Evaluator] = {}
    runs = []
    for study in studies:
        settings = load_settings(study)
        made[settings_key(settings)] = make_evaluator(settings)  # checks each model first
        runs.append(study_run(study, settings, space_of(settings), None, sole_asker=False))
    issued = (
        sum(issue_trials(r.study, args.trials, by="worker") for r in runs) if args.trials else 0
    )
    with ScoringPool(1, make_evaluator, lambda s: made[settings_key(s)]) as pool:
        run_studies(runs, pool)
    done = sum(run.done for run in runs)
    print(
        f"worker {worker_id()}: ran {done} trial(s) of workload {args.workload} "
        f"({len(runs)} studies, {issued} issued now)"
    )
    return 0
