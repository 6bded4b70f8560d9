"""`dse export`: one trial of a study as a versioned config JSON for `dse compile` and builds."""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from dse.config import build_config, pool_within, select_trial, write_config
from dse.errors import NothingFits
from dse.sizes import format_size
from dse.study import load_study, open_storage

# How many trials within a --max-sram budget are tried in turn when the fastest cannot be
# built the same at a pool within it (each try compiles the point at a few pools).
_BUDGET_TRIES = 4


def within_budget(study: optuna.Study, budget: int) -> tuple[FrozenTrial, int]:
    """The fastest trial within `budget` bytes of SRAM that builds the same at a pool within
    it, and that pool: a sampled pool above the budget may choose another proposal when
    lowered, and then the next fastest trial within the budget serves."""
    skipped: set[int] = set()
    first: NothingFits | None = None
    while True:
        try:
            trial = select_trial(study, max_sram=budget, skip=frozenset(skipped))
        except NothingFits:
            if first is None:
                raise
            raise first from None
        try:
            return trial, pool_within(study, trial, budget)
        except NothingFits as error:
            first = first or error
            skipped.add(trial.number)
            if len(skipped) >= _BUDGET_TRIES:
                raise first from None


def run(args: argparse.Namespace) -> int:
    study = load_study(open_storage(args.storage, heartbeat=False, create=False), args.study)
    if args.max_sram is not None:
        trial, pool = within_budget(study, args.max_sram)
    else:
        trial, pool = select_trial(study, args.trial, args.max_sram, args.max_cycles), None
    config = build_config(study, trial, args.storage, pool)
    write_config(config, Path(args.output))
    predicted = config["predicted"]
    print(
        f"trial {trial.number}: pool {format_size(config['sram_pool_bytes'])}, SRAM used "
        f"{format_size(predicted['sram_used_bytes'])}, {predicted['total_cycles']:,} cycles "
        f"-> {args.output}"
    )
    return 0
