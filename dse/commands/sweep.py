"""`dse sweep`: create or continue a study, run trials, print the Pareto front."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from optuna.trial import FrozenTrial

from cascader.ethosu.defaults import DEFAULT_ACCELERATOR, system_defaults
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_arch import check_vela_accelerator
from dse.cache_stats import describe, study_cache_stats
from dse.database import shown_url
from dse.defaults import DEFAULT_OBJECTIVES, SRAM_MAX, SRAM_MIN
from dse.driver import issue_trials, run_sweep
from dse.errors import BadInput
from dse.evaluators import handover, make_evaluator
from dse.front import format_front, front_rows, lower_bound_fact, pareto_front
from dse.gc_policy import collected_between_evaluations
from dse.phases import say
from dse.scoring_pool import ScoringPool
from dse.space import PRODUCERS, SearchSpace
from dse.study import (
    StudySettings,
    continued_settings,
    create_or_continue,
    default_storage,
    open_if_present,
    open_storage,
    parse_objectives,
    source_sha256,
    stored_settings,
)
from dse.tickets import completed_trials, mark_interrupted, resumed_tickets
from dse.vela_points import (
    baseline_budgets,
    count_matched,
    format_vela,
    run_baseline,
    vela_points,
)
from dse.workload import ALL_ACCELERATORS
from dse.workload_run import run_workload

# The argparse names of the settings a continued study takes from the command line only when
# given there (dse.study.continued_settings).
_GIVEN = {
    "accelerator": "accelerator_config",
    "system_config": "system_config",
    "memory_mode": "memory_mode",
    "vela_config": "vela_config",
    "sram_min": "sram_min",
    "sram_max": "sram_max",
    "objectives": "objectives",
    "sampler": "sampler",
    "producers": "producers",
}


def parse_producers(text: str | None, kind: str, accelerator: str) -> tuple[str, ...]:
    """The study's producers: as given, else both for a model on Ethos-U55/U65 (the union
    front: at every budget the better of Vela's schedule and the cascader's), Vela's compiler
    alone on Ethos-U85 (where the cascader has no device model yet), and the cascader alone
    for a graph (its own cost; there is no model for Vela to compile)."""
    if text is None:
        if kind == "graph":
            return ("cascader",)
        return ("vela",) if accelerator.startswith("ethos-u85") else PRODUCERS
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names or len(set(names)) != len(names) or not set(names) <= set(PRODUCERS):
        raise BadInput(f"bad --producers {text!r}: give cascader, vela or cascader,vela")
    if kind == "graph" and names != ("cascader",):
        raise BadInput("a --graph study has only the cascader's own cost: drop --producers")
    if "cascader" in names and accelerator.startswith("ethos-u85"):
        raise BadInput(
            f"the cascader has no {accelerator} device model yet (Ethos-U55 and U65 only); "
            "give --producers vela"
        )
    return tuple(p for p in PRODUCERS if p in names)


def settings_from_args(args: argparse.Namespace) -> StudySettings:
    """The settings of a new study, the defaults filling what the command line leaves out."""
    model = args.model[0] if isinstance(args.model, list) else args.model  # --model repeats
    kind, given = ("graph", args.graph) if args.graph else ("model", model)
    path = Path(given)
    sha256 = source_sha256(kind, path)  # refuses a missing, special or oversized file
    accelerator = args.accelerator_config or DEFAULT_ACCELERATOR
    try:
        check_vela_accelerator(accelerator)
    except DeviceConfigError as error:
        raise BadInput(str(error)) from None
    system_config, memory_mode = system_defaults(accelerator, args.system_config, args.memory_mode)
    return StudySettings(
        source_kind=kind,
        source_path=str(path.resolve()),
        source_sha256=sha256,
        accelerator=accelerator,
        system_config=system_config,
        memory_mode=memory_mode,
        vela_config=str(Path(args.vela_config).resolve()) if args.vela_config else None,
        sram_min=SRAM_MIN if args.sram_min is None else args.sram_min,
        sram_max=SRAM_MAX if args.sram_max is None else args.sram_max,
        objectives=parse_objectives(args.objectives or DEFAULT_OBJECTIVES),
        sampler=args.sampler or "default",
        producers=parse_producers(args.producers, kind, accelerator),
    )


def sweep_settings(args: argparse.Namespace, storage) -> tuple[StudySettings, str]:
    """The study's name and the settings a sweep runs with: the command line's for a new
    study; a study that exists (in `storage`, None when there is none yet) runs with its
    own, and nothing is written to it before the model is checked against them."""
    settings = settings_from_args(args)
    SearchSpace(settings.sram_min, settings.sram_max)  # refuses an empty range up front
    name = args.study or f"{Path(settings.source_path).stem}-{settings.accelerator}"
    stored = stored_settings(storage, name) if storage is not None else None
    if stored is not None:
        given = {field for field, dest in _GIVEN.items() if getattr(args, dest) is not None}
        settings = continued_settings(name, stored, settings, given)
    return settings, name


def _trial_count(trials: list[FrozenTrial]) -> str:
    """ "N trials", and in a study of both producers how many were each one's."""
    producers = Counter(t.user_attrs["config"].get("producer", "cascader") for t in trials)
    if len(producers) < 2:
        return f"{len(trials)} trials"
    return f"{len(trials)} trials: {producers['cascader']} cascader, {producers['vela']} vela"


def run(args: argparse.Namespace) -> int:
    with collected_between_evaluations():
        return _sweep(args)


def _workload_asked(args: argparse.Namespace) -> bool:
    """Several models, several NPU configurations or a workload file make a workload."""
    several = args.accelerator_config is not None and (
        "," in args.accelerator_config or args.accelerator_config.strip() == ALL_ACCELERATORS
    )
    return args.workload is not None or len(args.model or []) > 1 or several


def _sweep(args: argparse.Namespace) -> int:
    if _workload_asked(args):
        if args.graph:
            raise BadInput("a workload is of models: give --model files, not --graph")
        return run_workload(args, settings_from_args, DEFAULT_ACCELERATOR)
    if args.budget_ms is not None or args.max_sram is not None:
        raise BadInput(
            "--budget-ms and --max-sram are a workload's: give several --model files, "
            "NPU configurations or a --workload file"
        )
    if bool(args.model) == bool(args.graph):
        raise BadInput("give exactly one of --model M.tflite or --graph G.json")
    out = Path(args.out)
    storage_url = args.storage or default_storage(out)
    storage = open_if_present(storage_url)
    settings, name = sweep_settings(args, storage)
    say(f"reading {Path(settings.source_path).name}: import, NPU partition and graph")
    evaluate = make_evaluator(settings)  # validates the model/graph before the study is touched
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInput(f"--out {out}: cannot make the folder ({error.strerror})") from None
    if storage is None:
        storage = open_storage(storage_url, create=True)
    study = create_or_continue(storage, name, settings)
    with ScoringPool(args.jobs, make_evaluator, lambda _settings: evaluate) as pool:
        # Workers take over the model this process prepared, then probe floors with it.
        pool.warm(settings, handover(evaluate) if args.jobs > 1 else None)
        probe = lambda points: pool.score_all(settings, points)  # noqa: E731
        left = resumed_tickets(study)
        say("probing where each seed kind of schedule starts to fit" if not left else "resuming")
        issued = left or issue_trials(study, args.trials, by="sweep", score_all=probe)
        if left and not args.json:
            print(f"finishing the {left} trial(s) an interrupted run of {name} left", flush=True)
        try:
            run_sweep(study, issued, pool, progress=not args.json, seed=args.seed)
        except KeyboardInterrupt:
            mark_interrupted(study)
            raise
    if args.baseline == "vela":
        run_baseline(study, settings, baseline_budgets(study, settings))
    rows = front_rows(pareto_front(study))
    completed = completed_trials(study)
    n_trials = len(completed)
    cache = study_cache_stats(study)
    if args.json:
        shown = shown_url(storage_url)  # the password masked
        result = {"study": name, "storage": shown, "trials": n_trials, "front": rows}
        vela = vela_points(study)
        result |= {"cache": cache, "vela": vela, "vela_matched": count_matched(rows, vela)}
        print(json.dumps(result, indent=2))
        return 0
    print(f"Pareto front of {name} ({_trial_count(completed)}; {len(rows)} on the front):")
    print(format_front(rows) if rows else "(no feasible point yet: raise --sram-max)")
    bound = lower_bound_fact(completed)
    if bound is not None:
        print(f"SRAM lower bound {bound}")
    if describe(cache):
        print(f"cache: {describe(cache)}")
    vela = vela_points(study)
    if vela:  # this run's baseline or an earlier one's
        print(format_vela(vela, rows))
    print(f"study: {name} in {shown_url(storage_url)}")
    print(f"report: dse report --storage {shown_url(storage_url)} --study {name}")
    return 0
