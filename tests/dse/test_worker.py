"""`dse worker`: exact trial counts across processes and retry of a killed worker's trial.

The PostgreSQL test needs a server: .ci/run starts one and sets DSE_TEST_POSTGRES_URL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from backends import BACKENDS, storage_url
from optuna.trial import TrialState

from dse.cli import main
from dse.refine import PROBE_OF, STEP_OF
from dse.space import ALWAYS_COPY_SIZES, DesignPoint, SearchSpace
from dse.study import NoTicketLeft, open_storage
from dse.tickets import fail_stale, issue, requested_trials

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
# A trial whose point is fully chosen is evaluating it (every parameter of a model study of
# the cascader).
POINT_PARAMS = len(SearchSpace(16, 1 << 20, cascader_optional=True).params_of(DesignPoint(16)))
# A killed worker's trial is retried after the grace period; a live worker busy in a long
# point on a loaded machine can miss a beat or two, so the grace is several beats.
FAST_HEARTBEAT = {"DSE_HEARTBEAT_SECONDS": "1", "DSE_GRACE_SECONDS": "5"}


def _sweep(storage: str, study: str, trials: int, *extra: str) -> None:
    argv = ["sweep", "--model", str(EXAMPLE), "--storage", storage, "--study", study]
    argv += ["--producers", "cascader"]
    argv += ["--trials", str(trials), "--sram-min", "128KiB", "--sram-max", "1MiB", "--json"]
    assert main([*argv, *extra]) == 0


def _worker(storage: str, study: str, trials: int | None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "dse", "worker", "--storage", storage, "--study", study]
    if trials is not None:
        argv += ["--trials", str(trials)]
    env = {**os.environ, **FAST_HEARTBEAT}
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _kill_mid_trial(study: optuna.Study, procs: list[subprocess.Popen[str]]) -> int:
    """SIGKILL a worker while it evaluates a trial (its point chosen); returns the trial's
    number. The worker is stopped (SIGSTOP) first so the trial cannot finish in between."""
    by_pid = {p.pid: p for p in procs}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            pid = int(str(trial.user_attrs.get("worker", ":0")).rsplit(":", 1)[1])
            if pid not in by_pid:
                continue
            os.kill(pid, signal.SIGSTOP)
            (now,) = [t for t in study.get_trials(deepcopy=False) if t.number == trial.number]
            if now.state == TrialState.RUNNING and len(now.params) == POINT_PARAMS:
                os.kill(pid, signal.SIGKILL)
                by_pid[pid].wait()
                return trial.number
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError("no worker was seen running a trial")


def test_worker_trials_add_to_the_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    _sweep(storage, "s", 2)
    assert main(["worker", "--storage", storage, "--study", "s", "--trials", "3"]) == 0
    assert "ran 3 trial(s); study s: 5 of 5 requested trials complete" in capsys.readouterr().out
    assert main(["worker", "--storage", storage, "--study", "s"]) == 0
    assert "ran 0 trial(s); study s: 5 of 5 requested" in capsys.readouterr().out
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_three_workers_run_exactly_the_requested_trials(backend: str, tmp_path: Path) -> None:
    storage = storage_url(backend, tmp_path)
    name = f"workers-{os.getpid()}-{time.time_ns()}"
    _sweep(storage, name, 1)
    procs = [_worker(storage, name, 4) for _ in range(3)]
    study = optuna.load_study(study_name=name, storage=storage)
    killed = _kill_mid_trial(study, procs)
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, -signal.SIGKILL), err

    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert requested_trials(study) == 1 + 3 * 4
    assert len(complete) == 13
    assert {t.state for t in trials} == {TrialState.COMPLETE, TrialState.FAIL}
    failed = [t for t in trials if t.state == TrialState.FAIL]
    # The killed worker's trial failed. Under load a late heartbeat can fail another one as
    # stale (its worker then drops its result), a retry too: each failed trial's point is
    # completed once, by the retry whose history names it.
    assert killed in {t.number for t in failed}
    for trial in failed:
        (retry,) = [t for t in complete if trial.number in t.system_attrs.get("retry_history", [])]
        assert retry.params == trial.params
    keys = [tuple(sorted(t.params.items())) for t in complete]
    assert len(set(keys)) == len(keys), "a point was evaluated twice"


def test_a_ticket_claimed_by_a_worker_that_died_at_once_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed right after it claims a ticket, before its heartbeat thread has beaten
    (the sampler runs in between), still leaves a trial that goes stale."""
    monkeypatch.setenv("DSE_HEARTBEAT_SECONDS", "1")
    monkeypatch.setenv("DSE_GRACE_SECONDS", "1")
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    study = optuna.create_study(storage=storage, study_name="t")
    issue(study, 1, [{"x": 3}], by="test")
    with pytest.warns(UserWarning, match="Heartbeat of storage"):  # ask outside optimize
        claimed = study.ask()  # the worker "dies" here: no heartbeat thread ever runs
    time.sleep(2.5)
    fail_stale(study)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {claimed.number: TrialState.FAIL, claimed.number + 1: TrialState.WAITING}


def test_only_issued_trials_are_run(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=False)
    study = optuna.create_study(storage=storage, study_name="t")
    with pytest.raises(NoTicketLeft):
        study.ask()
    assert issue(study, 2, None, by="test") == 2
    assert requested_trials(study) == 2
    study.ask()
    study.ask()
    with pytest.raises(NoTicketLeft):
        study.ask()
    assert [t.state for t in study.trials] == [TrialState.RUNNING] * 2


def test_a_new_study_starts_with_each_seed_kind_at_its_floor(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    # Three floor seeds (the first three seed kinds, each at its floor), one spine seed.
    _sweep(storage, "seeded", 12)
    _sweep(storage, "seeded", 2)  # a continued study gets no more seeds
    study = optuna.load_study(study_name="seeded", storage=storage)
    fixed = [t.system_attrs["fixed_params"] for t in study.trials]
    defaults = DesignPoint(16).cascader_options()
    copy_all = DesignPoint(16, always_copy_size=ALWAYS_COPY_SIZES[-1]).cascader_options()
    assert [{k: v for k, v in f.items() if k != "sram_units"} for f in fixed[:3]] == [
        {"enable_cascader": True, **defaults, "buffer_weights": True, "narrow_nhwc": False},
        {"enable_cascader": True, **copy_all, "buffer_weights": True, "narrow_nhwc": False},
        {"enable_cascader": False, **defaults, "buffer_weights": True, "narrow_nhwc": False},
    ]
    # The spine seed sits on the pool ladder from the smallest floor up (SPINE_SHARE).
    spine = fixed[3]
    floor = min(t.user_attrs["config"]["sram_pool_bytes"] for t in study.trials[:3])
    ladder = SearchSpace(128 * 1024, 1 << 20, cascader_optional=True).sram_ladder(low=floor)
    assert spine and spine["sram_units"] * 16 in ladder
    # The rest are the sampler's, some of them steps along the front or probes of its gaps
    # (dse.refine).
    for params, trial in zip(fixed[4:], study.trials[4:], strict=True):
        assert params == {} or {STEP_OF, PROBE_OF} & trial.system_attrs.keys()
    for trial in study.trials[:3]:
        # Each seed fits its pool, which is the sweep's lowest or within 16 bytes of its need.
        metrics, pool = trial.user_attrs["metrics"], trial.user_attrs["config"]["sram_pool_bytes"]
        assert metrics["fits"]
        assert pool == 128 * 1024 or pool - metrics["sram_used_bytes"] < 16
    assert [t.user_attrs["config"]["enable_cascader"] for t in study.trials[:3]] == [
        True, True, False
    ]  # fmt: skip
