"""`dse sweep` of a workload: one study per (model, NPU configuration), all run from this
process with one scoring pool, then the workload's answer printed.

Each study first gets its own share of trials (its seeds among them); the rest of the
workload's trials go, one at a time, to the studies that decide the answer (`Picker`)."""

from __future__ import annotations

import argparse
import json
from concurrent.futures import wait
from dataclasses import replace
from pathlib import Path

from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from cascader.estimate import Estimate
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_arch import check_vela_system
from cascader.frontend.tflite_check import ModelError, parse_tflite, read_model
from dse.coordinator import StudyRun, run_studies, study_run
from dse.database import shown_url
from dse.driver import (
    SEED_SHARE,
    SPINE_SHARE,
    issue_trials,
    make_sampler,
    probe_points,
    space_of,
)
from dse.errors import BadInput
from dse.evaluators import make_evaluator
from dse.objective import Evaluator
from dse.phases import say
from dse.scoring_pool import ScoringPool, settings_key
from dse.space import DesignPoint, SearchSpace, align_down
from dse.study import StudySettings, create_or_continue, default_storage, open_storage
from dse.tickets import issue, mark_interrupted, resumed_tickets
from dse.workload import WORKLOAD_ATTR, Workload, accelerators_of, from_command_line, from_file
from dse.workload_answer import (
    ConfigAnswer,
    ModelPoint,
    answers_of,
    model_front,
    workload_answers,
)
from dse.workload_text import format_answers

# Of a workload's trials, this share is issued to each study up front (at least its seeds);
# the rest go where the answer is decided.
UP_FRONT = 0.5


def up_front_seeds(space: SearchSpace, trials: int) -> int:
    """Trials a new study needs for its seeds and a few sampled ones: the cascader's floor
    probes and spine (dse.driver.issue_trials; Vela's ladder comes on top), then four."""
    cascader = trials // SEED_SHARE + trials // SPINE_SHARE if "cascader" in space.producers else 0
    return cascader + 4


def workload_of(args: argparse.Namespace, default_accelerator: str) -> Workload:
    accelerators = (
        accelerators_of(args.accelerator_config, default_accelerator)
        if args.accelerator_config is not None or args.workload is None
        else None
    )
    if args.workload is not None:
        if args.model:
            raise BadInput("give the models in the --workload file or with --model, not both")
        return from_file(Path(args.workload), accelerators)
    assert accelerators is not None
    return from_command_line(args.model, accelerators, args.budget_ms, args.study)


def study_settings(
    args: argparse.Namespace, workload: Workload, settings_from_args
) -> list[tuple[str, StudySettings, dict]]:
    """(study name, settings, workload attr) of every study, models checked once and every
    configuration's names checked against Vela's vela.ini before anything is stored; each
    with a sweep's producers (`--producers`, else `sweep.parse_producers`' default)."""
    for model in workload.models:
        try:
            parse_tflite(read_model(model.path), str(model.path))
        except ModelError as error:
            raise BadInput(str(error)) from None
    studies = []
    for accelerator in workload.accelerators:
        for model in workload.models:
            given = replace_args(args, model=str(model.path), accelerator_config=accelerator)
            settings = settings_from_args(given)
            ini = [settings.vela_config] if settings.vela_config else []
            try:
                check_vela_system(
                    settings.accelerator, settings.system_config, settings.memory_mode, *ini
                )
            except DeviceConfigError as error:
                raise BadInput(f"{accelerator}: {error}") from None
            studies.append(
                (workload.study_name(model, accelerator), settings, workload.attr(model))
            )
    return studies


def replace_args(args: argparse.Namespace, **changes) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), **changes})


class Picker:
    """Takes each study's up-front tickets evenly (the study with fewest trials done first),
    then spends `extra` trials one at a time on the studies of the models that decide each
    configuration's answer: the model needing the most SRAM to meet its budget, or a model
    meeting it nowhere yet (more trials there move the answer; elsewhere they cannot), each
    trial an answer probe while one is left, else the sampler's. It
    follows the results as they come (`observe`), so choosing reads no storage."""

    def __init__(self, runs: list[StudyRun], attrs: dict[str, dict], extra: int) -> None:
        self.extra = extra
        self.attrs = attrs
        self.done: dict[str, list[FrozenTrial]] = {
            r.study.study_name: r.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            for r in runs
        }
        # The answer probes asked (`_answer_probe`): kinds by index, per study and pool.
        self.asked: dict[tuple[str, int], set[int]] = {}

    def observe(self, run: StudyRun, trial: FrozenTrial) -> None:
        self.done[run.study.study_name].append(trial)

    def __call__(self, runs: list[StudyRun]) -> StudyRun | None:
        open_runs = [run for run in runs if not run.out_of_tickets]
        if open_runs:
            ready = [run for run in open_runs if run.ready]
            return min(ready, key=lambda run: run.done) if ready else None
        if self.extra <= 0:
            return None
        names = [r.study.study_name for r in runs]
        fronts = [(r.settings, model_front(name, self.attrs[name], self.done[name]))
                  for r, name in zip(runs, names, strict=True)]  # fmt: skip
        deciding = {name for answer in answers_of(fronts) for name in _deciding(answer)}
        candidates = [run for run in runs if run.study.study_name in deciding] or runs
        # Where the deciding studies' process is busy, another process is not left idle:
        # it takes a trial of one of its own studies.
        ready = [run for run in candidates if run.ready] or [run for run in runs if run.ready]
        if not ready:
            return None
        run = min(ready, key=lambda r: r.done)
        need = next(f.need() for _, f in fronts if f.study == run.study.study_name)
        issued = 0
        while not issued and (probe := self._answer_probe(run, need)) is not None:
            issued = issue(run.study, 1, [probe], by="workload")  # 0: run or queued already
        if not issued:
            issue(run.study, 1, None, by="workload")
        run.out_of_tickets = False
        self.extra -= 1
        return run

    def _answer_probe(self, run: StudyRun, need: int | None) -> dict | None:
        """The deciding study's next answer probe: each kind of schedule (the seed kinds,
        then Vela's compiler) at one unit under the SRAM at which the model now meets its
        budget, each asked once per such SRAM. A kind that meets the budget there moves the
        answer down, and the sampler and the front steps find such a kind only by chance
        where the front crowds near the budget. None when every kind was asked there, or
        nothing meets the budget yet."""
        if need is None:
            return None
        pool = align_down(need - 1)
        if pool < run.space.low:
            return None
        kinds = [*run.space.seed_kinds()]
        if "vela" in run.space.producers:
            kinds.append(DesignPoint(0, producer="vela"))
        asked = self.asked.setdefault((run.study.study_name, pool), set())
        for index, kind in enumerate(kinds):
            if index not in asked:
                asked.add(index)
                return run.space.params_of(replace(kind, sram_pool_bytes=pool))
        return None


def _probe_floors(
    runs: list[StudyRun], pool: ScoringPool, trials: int
) -> list[tuple[StudyRun, list[Estimate]]]:
    """Every new study's floor probes (dse.driver.floor_seeds), all handed to the pool at
    once, each where its study is scored, so studies are probed side by side."""
    count = trials // SEED_SHARE
    asked = [
        (run, [pool.submit(run.settings, point, None)
               for point in (probe_points(run.space, count) if not run.study.trials else [])])
        for run in runs
    ]  # fmt: skip
    probed = []
    for run, futures in asked:
        wait(futures)
        for future in futures:
            pool.taken(future)
        probed.append((run, [future.result().estimate for future in futures]))
    return probed


def _deciding(answer: ConfigAnswer) -> list[str]:
    """The studies whose fronts decide a configuration's answer."""
    if answer.sram is None:
        return [f.study for f in answer.fronts if f.model in answer.missing]
    return [f.study for f in answer.fronts if f.need() == answer.sram]


def run_workload(args: argparse.Namespace, settings_from_args, default_accelerator: str) -> int:
    workload = workload_of(args, default_accelerator)
    say(
        f"workload {workload.name}: checking {len(workload.models)} model(s) on "
        f"{len(workload.accelerators)} NPU configuration(s)"
    )
    planned = study_settings(args, workload, settings_from_args)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInput(f"--out {out}: cannot make the folder ({error.strerror})") from None
    storage_url = args.storage or default_storage(out)
    storage = open_storage(storage_url, create=True)
    made: dict[str, Evaluator] = {}

    def here(settings: StudySettings) -> Evaluator:
        """This process's evaluator of a study, made when it first scores one of its points."""
        key = settings_key(settings)
        if key not in made:
            made[key] = make_evaluator(settings)
        return made[key]

    runs = []
    for name, settings, attr in planned:
        study = create_or_continue(storage, name, settings)
        if study.user_attrs.get(WORKLOAD_ATTR) != attr:
            study.set_user_attr(WORKLOAD_ATTR, attr)
        sampler = make_sampler(settings.sampler, args.seed) if settings.sampler != "grid" else None
        runs.append(study_run(study, settings, space_of(settings), sampler, True))
    with ScoringPool(args.jobs, make_evaluator, here) as pool:
        for run in runs[: args.jobs - 1]:
            pool.warm(run.settings)
        say(f"{len(runs)} studies: probing where each starts to fit, in {args.jobs} process(es)")
        left = sum([resumed_tickets(run.study) for run in runs])
        issued = left  # an interrupted run's rest is finished first, and nothing more asked
        shares = 0
        probed = [] if left else _probe_floors(runs, pool, args.trials)
        for run, estimates in probed:
            share = max(round(args.trials * UP_FRONT), up_front_seeds(run.space, args.trials))
            shares += min(share, args.trials)
            issued += issue_trials(
                run.study, min(share, args.trials), by="workload",
                score_all=lambda _points, found=estimates: found, seeded_as=args.trials,
            )  # fmt: skip
        extra = 0 if left else max(0, args.trials * len(runs) - shares)
        total = issued + extra
        picker = Picker(runs, {name: attr for name, _, attr in planned}, extra)
        with tqdm(total=total, disable=args.json, unit="trial", leave=False) as bar:

            def done(run: StudyRun, trial: FrozenTrial) -> None:
                picker.observe(run, trial)
                bar.update(1)

            try:
                run_studies(runs, pool, on_done=done, pick=picker)
            except KeyboardInterrupt:
                for run in runs:
                    mark_interrupted(run.study)
                raise
    answers = workload_answers([run.study for run in runs])
    if args.json:
        print(json.dumps(_json(workload, answers, storage_url), indent=2))
        return 0
    print(format_answers(workload, answers, args.max_sram))
    print(f"report: dse report --storage {shown_url(storage_url)} --workload {workload.name}")
    return 0


def _point_json(point: ModelPoint | None) -> dict | None:
    if point is None:
        return None
    return {"sram_used_bytes": point.sram, "inference_time_s": point.time_s,
            "total_cycles": point.cycles, "producer": point.producer,
            "trial": point.trial}  # fmt: skip


def _json(workload: Workload, answers: list[ConfigAnswer], storage_url: str) -> dict:
    return {
        "workload": workload.name,
        "storage": shown_url(storage_url),
        "configurations": [
            {
                "accelerator": a.accelerator,
                "system_config": a.system_config,
                "memory_mode": a.memory_mode,
                "sram_bytes": a.sram,
                "missing": list(a.missing),
                "models": {model: _point_json(p) for model, p in a.points.items()},
            }
            for a in answers
        ],
    }
