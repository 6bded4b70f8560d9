"""`dse worker`: join a study (typically on a shared PostgreSQL server) and run its trials."""

from __future__ import annotations

import argparse
import sys

from dse.collector import collected_between_evaluations
from dse.driver import issue_trials, run_sweep
from dse.evaluators import make_evaluator
from dse.scoring_pool import ScoringPool
from dse.study import load_settings, load_study, open_storage
from dse.tickets import completed_trials, requested_trials, worker_id


def run(args: argparse.Namespace) -> int:
    with collected_between_evaluations():
        return _work(args)


def _work(args: argparse.Namespace) -> int:
    study = load_study(open_storage(args.storage, create=False), args.study)
    evaluate = make_evaluator(load_settings(study))  # checks the model before touching the study
    issued = issue_trials(study, args.trials, by="worker") if args.trials else 0
    with ScoringPool(1, make_evaluator, lambda _settings: evaluate) as pool:
        done = run_sweep(study, issued, pool, sys.stderr.isatty(), sole_asker=False)
    print(
        f"worker {worker_id()}: ran {done} trial(s); study {args.study}: "
        f"{len(completed_trials(study))} of {requested_trials(study)} requested trials complete"
    )
    return 0
