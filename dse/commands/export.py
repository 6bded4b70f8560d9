"""`dse export`: one trial of a study as a versioned config JSON for `dse compile` and builds."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from dse.config import build_config, pool_within, select_trial, write_config
from dse.errors import BadInput, NothingFits
from dse.last_sweep import pick_study, storage_of
from dse.output import staged_folder
from dse.sizes import format_size
from dse.study import load_study, open_storage
from dse.workload import workload_studies
from dse.workload_answer import closest, fewest_macs, workload_answers

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
    args.storage = storage_of(args)
    storage = open_storage(args.storage, heartbeat=False, create=False)
    pick_study(args, storage)
    if args.workload is not None:
        return _workload(args, storage)
    if args.trial is None and args.max_sram is None and args.max_cycles is None:
        raise BadInput("give one of --trial N, --max-sram SIZE or --max-cycles N")
    if args.accelerator_config is not None:
        raise BadInput("--accelerator-config chooses among a workload's configurations")
    study = load_study(storage, args.study)
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


MARKER = "workload.json"  # what a folder `dse export --workload` wrote holds
OWNED = re.compile(r"[^/]+\.json")


def _workload(args: argparse.Namespace, storage) -> int:
    """One config per model at the chosen configuration's answer: each model's fastest point
    within the SRAM at which every model meets its budget."""
    if args.trial is not None or args.max_cycles is not None:
        raise BadInput("a workload is exported at its answer: give --max-sram or nothing")
    studies = {s.study_name: s for s in workload_studies(storage, args.workload)}
    answers = workload_answers(list(studies.values()))
    if args.accelerator_config is not None:
        chosen = [a for a in answers if a.accelerator == args.accelerator_config]
        if not chosen:
            names = ", ".join(a.accelerator for a in answers)
            raise BadInput(
                f"workload {args.workload} has no {args.accelerator_config}; it has {names}"
            )
        answer = chosen[0]
        if answer.sram is None or (args.max_sram is not None and answer.sram > args.max_sram):
            raise NothingFits(
                f"{answer.label} meets the budgets at no SRAM explored"
                + (f" within {format_size(args.max_sram)}" if args.max_sram else "")
            )
    else:
        answer = fewest_macs(answers, args.max_sram)
        if answer is None:
            within = f" within {format_size(args.max_sram)}" if args.max_sram else ""
            near = closest(answers, args.max_sram)
            raise NothingFits(
                f"no configuration meets the workload's budgets{within}"
                + (f"; the closest is {near.label}" if near else "")
            )
    out = Path(args.output)
    written = []
    with staged_folder(out, MARKER, OWNED, "-o") as staging:
        for front in answer.fronts:
            study = studies[front.study]
            point = answer.points[front.model]
            trial = next(t for t in study.get_trials(deepcopy=False) if t.number == point.trial)
            config = build_config(
                study, trial, args.storage, pool_within(study, trial, answer.sram)
            )
            write_config(config, staging / f"{front.model}.json")
            written.append(f"{front.model}.json")
        summary = {"workload": args.workload, "accelerator": answer.accelerator,
                   "system_config": answer.system_config, "memory_mode": answer.memory_mode,
                   "sram_bytes": answer.sram, "configs": written}  # fmt: skip
        (staging / MARKER).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{answer.label} at {format_size(answer.sram)}: {len(written)} configs -> {out}")
    return 0
