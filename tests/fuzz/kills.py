"""Kill runs (issue 21): `dse sweep` and `dse worker` processes SIGKILLed at random moments
(while they start, queue, claim, evaluate or store), then the study checked: what dse
stored still passes its checks, every request has exactly its tickets, and a later run
finishes every ticket. `tests/dse/test_kills.py` kills a few; `benchmarks/kills.py` many."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import TrialState

from dse.study import close_storages, load_study, open_storage
from dse.tickets import requested_trials

# A killed process's claim goes stale within seconds; a live one beats every second.
HEARTBEAT = {"DSE_HEARTBEAT_SECONDS": "1", "DSE_GRACE_SECONDS": "4"}
FINISH_SECONDS = 180
SWEEP_FLAGS = ("--sram-min", "16KiB", "--sram-max", "256KiB")


@dataclass(frozen=True)
class Kill:
    """One round: which command was killed after how long, how many trials it had run."""

    command: str
    after: float
    completed_before: int
    completed_after: int


def _dse(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "dse", *argv],
        env={**os.environ, **HEARTBEAT},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _command(kind: str, model: Path, storage: str, study: str, trials: int) -> list[str]:
    if kind == "sweep":
        argv = ["sweep", "--model", str(model), "--storage", storage, "--study", study]
        return [*argv, "--trials", str(trials), *SWEEP_FLAGS]
    return ["worker", "--storage", storage, "--study", study, "--trials", str(trials)]


def _completed(storage: str, study: str) -> int:
    found = optuna.load_study(study_name=study, storage=storage)
    count = len(found.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    close_storages()
    return count


def kill_round(
    rng: random.Random, model: Path, storage: str, study: str, latest: float = 8.0
) -> Kill:
    """Start a sweep or a worker (now and then both, one killed, one left to finish) on
    `study`, SIGKILL one after a random time up to `latest` seconds."""
    before = _completed(storage, study)
    kinds = rng.choice([("sweep",), ("worker",), ("sweep", "worker")])
    procs = {k: _dse(*_command(k, model, storage, study, rng.randint(1, 4))) for k in kinds}
    victim = rng.choice(kinds)
    after = rng.uniform(0.2, latest)
    time.sleep(after)
    procs[victim].send_signal(signal.SIGKILL)
    for kind, proc in procs.items():
        _, err = proc.communicate(timeout=FINISH_SECONDS)
        if kind != victim or proc.returncode != -signal.SIGKILL:
            # The victim may have finished before the signal; survivors must finish well.
            assert proc.returncode == 0, f"{kind} exited {proc.returncode}: {err.decode()}"
    return Kill(victim, after, before, _completed(storage, study))


def problems(storage: str, study: str) -> list[str]:
    """What is wrong with the study after the kills: stored data dse refuses, a request
    whose tickets are not all there (or tickets no request asked for)."""
    found = []
    try:
        loaded = load_study(open_storage(storage, heartbeat=False, create=False), study)
    except Exception as error:  # BadInput or worse: either way the study is not consistent
        return [f"the study does not load: {error}"]
    trials = loaded.get_trials(deepcopy=False)
    tickets = [t for t in trials if "failed_trial" not in t.system_attrs]
    if requested_trials(loaded) != len(tickets):
        found.append(f"{requested_trials(loaded)} trials requested, {len(tickets)} queued")
    close_storages()
    return found


def finish(storage: str, study: str) -> tuple[int, float, str]:
    """A later `dse worker` run to the end of the queue: its exit code, time and stderr."""
    start = time.monotonic()
    proc = _dse("worker", "--storage", storage, "--study", study)
    _, err = proc.communicate(timeout=FINISH_SECONDS)
    return proc.returncode, time.monotonic() - start, err.decode()


def open_tickets(storage: str, study: str) -> int:
    """Trials still waiting or running (none, once a later run finished)."""
    found = optuna.load_study(study_name=study, storage=storage)
    count = len(found.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING)))
    close_storages()
    return count


def new_study(model: Path, storage: str, study: str) -> None:
    proc = _dse(*_command("sweep", model, storage, study, 2))
    _, err = proc.communicate(timeout=FINISH_SECONDS)
    assert proc.returncode == 0, err.decode()
