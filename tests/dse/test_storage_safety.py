"""Storage that cannot wedge (issue 21): a claim left without a heartbeat, queueing that is
one transaction, a database server that accepts connections and never answers, passwords
masked, and two processes creating one study at once.

The PostgreSQL cases need a server: .ci/run starts one and sets DSE_TEST_POSTGRES_URL."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from backends import BACKENDS, POSTGRES_URL, needs_postgres, silent_server, storage_url
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

from cascader.testing.networks import single_op_model
from dse.refine import BISECT_OF, PROBE_OF, STEP_OF
from dse.study import close_storages, open_storage
from dse.tickets import issue, requested_trials

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

# Shortened so a stale claim is retried within seconds; the defaults (10 s beats, 30 s grace)
# bound the wait at under a minute the same way.
FAST_HEARTBEAT = {"DSE_HEARTBEAT_SECONDS": "1", "DSE_GRACE_SECONDS": "4"}
SWEEP_FLAGS = ("--sram-min", "16KiB", "--sram-max", "256KiB", "--json")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-convolution model: a trial costs a few milliseconds."""
    path = tmp_path_factory.mktemp("model") / "conv.tflite"
    path.write_bytes(single_op_model("CONV_2D", stride=2, padding="VALID"))
    return path


def _dse(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dse", *argv],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], seconds: float) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=seconds)
    return proc.returncode, out, err


def _sweep(model: Path, storage: str, study: str, trials: int) -> list[str]:
    argv = ["sweep", "--model", str(model), "--storage", storage, "--study", study]
    argv += ["--producers", "cascader"]
    return [*argv, "--trials", str(trials), *SWEEP_FLAGS]


def _name() -> str:
    return f"s{os.getpid()}x{time.time_ns()}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_claim_left_without_a_heartbeat_is_retried_by_a_sweep_and_a_worker(
    backend: str, model: Path, tmp_path: Path
) -> None:
    """The database a sweep SIGKILLed between committing its claim and its first heartbeat
    left behind (before the two were one transaction): a RUNNING trial with no heartbeat.
    A continued sweep and a worker started on it both finish, and the trial is retried."""
    storage, name = storage_url(backend, tmp_path), _name()
    assert _finish(_dse(*_sweep(model, storage, name, 2)), 120)[0] == 0
    study = optuna.load_study(study_name=name, storage=open_storage(storage, heartbeat=False))
    issue(study, 1, None, by="test")
    (ticket,) = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    study._storage.set_trial_state_values(ticket._trial_id, TrialState.RUNNING)
    close_storages()
    procs = [
        _dse(*_sweep(model, storage, name, 1), env=FAST_HEARTBEAT),
        _dse("worker", "--storage", storage, "--study", name, "--trials", "1", env=FAST_HEARTBEAT),
    ]
    for proc in procs:
        code, _, err = _finish(proc, 60)
        assert code == 0, err
    study = optuna.load_study(study_name=name, storage=storage)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states.pop(ticket.number) == TrialState.FAIL
    assert set(states.values()) == {TrialState.COMPLETE}
    assert len(states) == requested_trials(study) == 2 + 1 + 1 + 1  # and the retry


def test_a_request_and_its_tickets_are_recorded_together_or_not_at_all(tmp_path: Path) -> None:
    """Queueing is one transaction: when it fails half way (here a ticket that cannot be
    stored), neither the request nor any ticket is left, so requested and queued agree."""
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=False)
    study = optuna.create_study(storage=storage, study_name="t")
    tickets = [{"x": 1}, {"x": 2}, {"x": object()}]
    with pytest.raises(TypeError):
        storage.issue_tickets(study._study_id, ("dse.request.1", {"trials": 3}), tickets, 0)
    assert study.get_trials(deepcopy=False) == []
    assert requested_trials(study) == 0
    assert issue(study, 3, None, by="test") == 3
    assert requested_trials(study) == len(study.get_trials(deepcopy=False)) == 3


@pytest.fixture()
def silent_port() -> Iterator[int]:
    with silent_server() as port:
        yield port


def test_a_server_that_accepts_and_never_answers_fails_every_command_in_one_line(
    silent_port: int, model: Path, tmp_path: Path
) -> None:
    url = f"postgresql+psycopg2://dse:s3cret-pw@127.0.0.1:{silent_port}/studies"
    commands = {
        "sweep": _sweep(model, url, "s", 1),
        "worker": ["worker", "--storage", url, "--study", "s"],
        "export": [
            "export",
            "--storage",
            url,
            "--study",
            "s",
            "--trial",
            "0",
            "-o",
            str(tmp_path / "c.json"),
        ],
        "report": ["report", "--storage", url, "--study", "s", "--out", str(tmp_path / "r")],
    }
    procs = {name: _dse(*argv) for name, argv in commands.items()}
    for name, proc in procs.items():
        code, _, err = _finish(proc, 60)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (name, err)
        assert f"127.0.0.1:{silent_port}" in lines[0], lines[0]
        assert "s3cret-pw" not in err and "***" in lines[0], lines[0]


def test_a_failing_url_never_shows_its_password(capsys: pytest.CaptureFixture[str]) -> None:
    from dse.cli import main

    for url in (
        "postgresql+psycopg2://dse:s3cret-pw@127.0.0.1:1/studies",  # nothing listens
        "postgresql+nosuchdriver://dse:s3cret-pw@127.0.0.1:1/studies",
        "nosuch://dse:s3cret-pw@host/db",
    ):
        assert main(["worker", "--storage", url, "--study", "s"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "s3cret-pw" not in err, err


def _seeds(study: optuna.Study) -> int:
    """Trials at a new study's seed points (fixed points that are not refinements)."""
    marks = {STEP_OF, PROBE_OF, BISECT_OF}
    return sum(
        1
        for t in study.get_trials(deepcopy=False)
        if t.system_attrs.get("fixed_params") and not marks & t.system_attrs.keys()
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_processes_creating_one_study_both_run_and_seed_it_once(
    backend: str, model: Path, tmp_path: Path
) -> None:
    """The one that loses the race continues the study the other made (no "table already
    exists", "UNIQUE constraint failed" or "not made by dse sweep"), and the new study's seed
    points are queued once, as they are for a study one sweep makes alone."""
    storage, alone, name = storage_url(backend, tmp_path), _name(), _name()
    if backend == "sqlite":  # a new file as well as a new study
        storage = f"sqlite:///{tmp_path / name}.db"
    procs = [_dse(*_sweep(model, storage, n, 12)) for n in (name, name, alone)]
    for proc in procs:
        code, _, err = _finish(proc, 120)
        assert code == 0, err
    raced, single = (optuna.load_study(study_name=n, storage=storage) for n in (name, alone))
    assert _seeds(raced) == _seeds(single) > 0
    states = [t.state for t in raced.get_trials(deepcopy=False)]
    assert requested_trials(raced) == len(states) == 24
    assert set(states) == {TrialState.COMPLETE}


def test_queued_and_requested_agree_after_a_kill_before_the_commit(tmp_path: Path) -> None:
    """What a SIGKILL in the middle of queueing leaves: the transaction never committed, so
    the database holds neither the request nor any of its tickets."""
    db = tmp_path / "study.db"
    storage = open_storage(f"sqlite:///{db}", heartbeat=False)
    study = optuna.create_study(storage=storage, study_name="t")
    issue(study, 2, None, by="test")
    close_storages()
    child = subprocess.Popen(
        [sys.executable, "-c", _QUEUE_AND_DIE, str(db)], stderr=subprocess.PIPE, text=True
    )
    _, err = child.communicate(timeout=60)
    assert child.returncode == -9, err
    with sqlite3.connect(db) as con:  # the killed writer's log is replayed or dropped
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    study = optuna.load_study(study_name="t", storage=open_storage(f"sqlite:///{db}"))
    assert requested_trials(study) == len(study.get_trials(deepcopy=False)) == 2


# Queues 20 tickets and SIGKILLs itself inside the transaction, once the tickets are
# written (its own connection sees them) and before the commit.
_QUEUE_AND_DIE = """
import os, signal, sys
import sqlalchemy
import optuna
from dse.study import open_storage
from dse.tickets import issue
storage = open_storage(f"sqlite:///{sys.argv[1]}", heartbeat=False)
study = optuna.load_study(study_name="t", storage=storage)
@sqlalchemy.event.listens_for(storage.engine, "commit")
def die(connection):
    if connection.exec_driver_sql("SELECT count(*) FROM trials").scalar() == 22:
        os.kill(os.getpid(), signal.SIGKILL)
issue(study, 20, None, by="test")
"""


@needs_postgres
def test_a_sweep_never_prints_its_storage_password(model: Path) -> None:
    assert POSTGRES_URL is not None
    url = make_url(POSTGRES_URL).set(password="s3cret-pw").render_as_string(hide_password=False)
    for extra in ((), ("--json",)):
        argv = ["sweep", "--model", str(model), "--storage", url, "--study", _name()]
        argv += ["--producers", "cascader"]
        code, out, err = _finish(_dse(*argv, "--trials", "1", *extra), 120)
        assert code == 0, err
        assert "s3cret-pw" not in out + err and "***" in out
