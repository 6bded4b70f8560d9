"""Runs the issued trials of one or more studies from this process: it asks every trial of
every study and records every result (one sampler per study, seeing all of that study's
results, so its front refinement steps are taken in parallel runs as in serial ones), while
a ScoringPool scores the points, in this process and its worker processes.

The caller owns the pool (`with ScoringPool(...)`), so its workers can start before the run.
Which study's ticket is taken next is the caller's `pick` (a workload puts trials where they
change its answer most); a study leaves the run when its tickets are all taken. Trials of
other processes (`dse worker` on other machines) are waited for at the end, so a dead
worker's trial still comes back and is run.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Hashable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from dse.cache_stats import record
from dse.gc_policy import collected_between_evaluations
from dse.objective import TrialRecorder
from dse.refine import with_front_steps
from dse.scoring_pool import ScoringPool
from dse.space import SRAM_ALIGN, DesignPoint, SearchSpace
from dse.study import NoTicketLeft, StudySettings, heartbeat_seconds
from dse.tickets import fail_stale, ticket_storage


@dataclass
class StudyRun:
    """One study's part of a run: the study (its sampler set for this run), what fixes its
    points, and how many of its trials this run completed."""

    study: optuna.Study
    settings: StudySettings
    space: SearchSpace
    recorder: TrialRecorder
    done: int = 0
    out_of_tickets: bool = False
    ready: bool = True  # the process scoring this study's points has room for one more


# Chooses the study whose ticket is taken next among the `ready` ones, seeing all of the run's
# (a pick may issue a ticket to the study it chooses and clear its `out_of_tickets`); None:
# nothing to take now (the run ends when nothing is being scored either).
Pick = Callable[[list["StudyRun"]], "StudyRun | None"]
OnDone = Callable[[StudyRun, FrozenTrial], None]


def affinity(point: DesignPoint, studies: int) -> Hashable:
    """What a scorer keeps between points: of a study alone, the cascader's proposals of one
    option set on one form of the network (narrow feature maps' layout, means summing rows
    first: each form's network has its own); of
    several, the whole study (its session and all its proposals), so no two processes build
    the same session or run the same cascade."""
    if studies > 1:
        return None
    config = point.config()
    return config.options, config.narrow_nhwc, config.row_sum_mean


def first_open(runs: list[StudyRun]) -> StudyRun | None:
    """The default pick: studies in order, each to its last ticket (of those `ready`)."""
    return next((run for run in runs if run.ready and not run.out_of_tickets), None)


def study_run(
    study: optuna.Study,
    settings: StudySettings,
    space: SearchSpace,
    sampler: optuna.samplers.BaseSampler | None,
    sole_asker: bool,
) -> StudyRun:
    """A study ready to be run: `sampler` (the study's own when None) with front refinement,
    told whether this process asks every trial the study runs meanwhile (dse.refine)."""
    if settings.sampler != "grid":
        base = sampler or study.sampler
        study.sampler = with_front_steps(
            base, space.low // SRAM_ALIGN, space.high // SRAM_ALIGN, sole_asker
        )
    return StudyRun(study, settings, space, TrialRecorder(settings, space))


def run_studies(
    runs: list[StudyRun],
    pool: ScoringPool,
    on_done: OnDone | None = None,
    pick: Pick = first_open,
) -> None:
    """Run every issued trial of `runs`, scored by `pool`, with the collector run between
    evaluations (dse.gc_policy); each study's cache counts are stored with it at the end."""
    with collected_between_evaluations():
        _run(runs, pool, on_done, pick)
    for run in runs:
        record(run.study, pool.cache(run.settings))


def _run(runs: list[StudyRun], pool: ScoringPool, on_done: OnDone | None, pick: Pick) -> None:
    flying: dict[Future, tuple[StudyRun, optuna.Trial, DesignPoint]] = {}
    poll, _grace = heartbeat_seconds()
    last_beat = time.monotonic()
    try:
        for run in runs:
            fail_stale(run.study)
        while True:
            while pool.has_room():
                for run in runs:  # a study of several is scored where its session is
                    run.ready = len(runs) == 1 or pool.has_room_for(run.settings, None)
                asked = _ask(runs, pick)
                if asked is None:
                    break
                run, trial, point = asked
                # This process may score it here, at once.
                future = pool.submit(run.settings, point, affinity(point, len(runs)))
                flying[future] = (run, trial, point)
            if not flying:
                if not _others_running(runs):
                    break
                time.sleep(min(1.0, poll / 2))
                continue
            finished, _ = wait(flying, timeout=min(1.0, poll / 2), return_when=FIRST_COMPLETED)
            if time.monotonic() - last_beat >= poll / 2:
                _beat(flying.values())
                last_beat = time.monotonic()
            for future in finished:
                run, trial, point = flying.pop(future)
                pool.taken(future)
                _tell(run, trial, point, future, on_done)
    except BaseException:
        for run in runs:
            _give_back(run)
        raise


def _give_back(run: StudyRun) -> None:
    """Interrupted (Ctrl-C) or failed: every trial of the study this process claimed and did
    not finish (being scored, or caught between its claim and its result: inside `ask`'s
    sampler or `tell`) is failed and issued again with its point, so a rerun still runs
    every trial that was asked for and none is left running."""
    storage = ticket_storage(run.study)
    running: list[FrozenTrial] = []
    with contextlib.suppress(Exception):
        running = run.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in running:
        if storage.claimed(trial._trial_id):
            with contextlib.suppress(Exception):
                params = {**trial.system_attrs.get("fixed_params", {}), **trial.params}
                run.study.tell(trial.number, state=TrialState.FAIL)
                run.study.enqueue_trial(params)


def _ask(runs: list[StudyRun], pick: Pick) -> tuple[StudyRun, optuna.Trial, DesignPoint] | None:
    """The next ticket of the study `pick` chooses."""
    while True:
        run = pick(runs)
        if run is None:
            return None
        try:
            with warnings.catch_warnings():
                # Optuna warns that heartbeats are for `optimize`: this loop beats itself.
                warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
                trial = run.study.ask()
        except NoTicketLeft:
            run.out_of_tickets = True
            continue
        return run, trial, run.recorder.start(trial)


def _tell(
    run: StudyRun, trial: optuna.Trial, point: DesignPoint, future: Future, on_done: OnDone | None
) -> None:
    # UpdateFinishedTrialError: another process found the trial's heartbeat late (a loaded
    # machine), failed it as stale and queued its retry, which records the point instead.
    try:
        scored = future.result()
        values = run.recorder.finish(trial, point, scored.estimate, scored.seconds)
    except UpdateFinishedTrialError:
        return
    except KeyboardInterrupt:  # scored, not recorded: `_run` gives it back for a rerun
        raise
    except BaseException:
        run.study.tell(trial, state=TrialState.FAIL)
        raise
    try:
        frozen = run.study.tell(trial, values)
    except UpdateFinishedTrialError:
        return
    run.done += 1
    if on_done is not None:
        on_done(run, frozen)


def _beat(flying) -> None:
    """Heartbeats for the trials being scored (Optuna beats only for `optimize`'s trials)."""
    for run, trial, _point in flying:
        storage = ticket_storage(run.study)
        if storage.get_heartbeat_interval() is not None:
            storage.record_heartbeat(trial._trial_id)


def _others_running(runs: list[StudyRun]) -> bool:
    """Whether another process still runs a trial of these studies; a dead one's trial goes
    stale and comes back as a ticket, so the studies are opened to asking again."""
    running = False
    for run in runs:
        fail_stale(run.study)
        if run.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            run.out_of_tickets = False
        running |= bool(run.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        running |= not run.out_of_tickets
    return running
