"""Issued trials: how a study runs exactly the number of trials that were asked for.

`dse sweep --trials N` and `dse worker --trials N` enqueue N WAITING trials (tickets) and record
the request in a study user attr of its own (distinct keys, so concurrent requests never
overwrite each other), both in one transaction: a process killed meanwhile leaves neither.
Workers then take tickets until none is waiting or running anywhere; a ticket held by a dead
worker goes stale, is failed by Optuna's heartbeat check and re-queued with the same
parameters, so it is run again rather than lost.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Sequence

import optuna
from optuna.storages import fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from dse.stored import REQUEST_PREFIX
from dse.study import TicketStorage

_OPEN = (TrialState.WAITING, TrialState.RUNNING)


def worker_id() -> str:
    """Which process on which machine ran a trial."""
    return f"{socket.gethostname()}:{os.getpid()}"


def requested_trials(study: optuna.Study) -> int:
    """The study's target: the sum of every `--trials` request made on it."""
    return sum(
        value["trials"] for key, value in study.user_attrs.items() if key.startswith(REQUEST_PREFIX)
    )


INTERRUPTED = "dse.interrupted"  # study user attr: tickets an interrupted run left waiting


def mark_interrupted(study: optuna.Study) -> None:
    """Record that a run of the study was interrupted (Ctrl-C) with tickets still waiting."""
    study.set_user_attr(INTERRUPTED, True)


def resumed_tickets(study: optuna.Study) -> int:
    """The tickets an interrupted run left (0 when the last run was not interrupted): the
    next sweep of the study runs them instead of asking for more, so a rerun of the command
    finishes the study to the trials asked. Tickets another process is running meanwhile
    are its own, and a sweep beside it asks for its own trials as ever."""
    if not study.user_attrs.get(INTERRUPTED):
        return 0
    study.set_user_attr(INTERRUPTED, False)
    return len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def completed_trials(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def _unvisited_grid_points(study: optuna.Study, grid: list[dict]) -> list[dict]:
    """Grid points no completed, running or waiting trial has (a grid is run once)."""
    names = sorted({n for point in grid for n in point})
    taken = {
        tuple(t.params.get(n) for n in names)
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, *_OPEN))
    }
    taken |= {
        tuple(t.system_attrs.get("fixed_params", {}).get(n) for n in names)
        for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    }
    return [p for p in grid if tuple(p.get(n) for n in names) not in taken]


def issue(
    study: optuna.Study,
    n_trials: int,
    grid: list[dict] | None,
    by: str,
    seeds: Sequence[dict] = (),
) -> int:
    """Enqueue `n_trials` tickets and record the request, in one transaction. A grid study
    gets up to that many unvisited grid points; otherwise the `seeds` (fixed points) come
    first, then empty tickets the sampler fills in (the seeds too, when another process
    has put trials in the study first: a new study is seeded once). Returns how many were
    issued."""
    seeded = 0
    if grid:
        points = _unvisited_grid_points(study, grid)[:n_trials]
    else:
        points = list(seeds)[:n_trials]
        seeded = len(points)
        points += [{}] * (n_trials - len(points))
    if not points:
        return 0
    key = f"{REQUEST_PREFIX}{time.time_ns()}.{worker_id()}"
    request = (key, {"trials": len(points), "by": by})
    return ticket_storage(study).issue_tickets(study._study_id, request, points, seeded)


def ticket_storage(study: optuna.Study) -> TicketStorage:
    """The study's TicketStorage (Optuna wraps an RDB storage in its cache; it is pinned)."""
    storage = getattr(study._storage, "_backend", study._storage)
    assert isinstance(storage, TicketStorage), "open studies with dse.study.open_storage"
    return storage


def fail_stale(study: optuna.Study) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        fail_stale_trials(study)
