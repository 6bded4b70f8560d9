"""The ticket storage keeps waiting tickets and its own trial in memory between reads (Optuna's
storage cache reads every unfinished trial before each suggestion), and what it returns stays
what the database holds: a ticket claimed, finished or issued by another process shows up at
once. The garbage collector is paused while trials run, and still frees what they leave."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import optuna
import pytest

from cascader.estimate import Estimate
from dse.coordinator import run_studies, study_run
from dse.objective import TrialRecorder
from dse.scoring_pool import ScoringPool
from dse.space import DesignPoint, SearchSpace
from dse.study import StudySettings, open_storage
from dse.tickets import issue


def _view(study: optuna.Study) -> list[tuple]:
    return [
        (t.number, t.state, t.params, t.distributions, t.values, t.user_attrs, t.system_attrs)
        for t in study.get_trials(deepcopy=False)
    ]


def _issued_study(tmp_path: Path, tickets: int) -> tuple[optuna.Study, StudySettings, SearchSpace]:
    """A new study in SQLite with `tickets` trials issued, its settings and its space."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(
        storage=open_storage(url, heartbeat=False), study_name="s", directions=["minimize"] * 2
    )
    issue(study, tickets, None, "test")
    settings = StudySettings("model", "m.tflite", "0" * 64, "ethos-u55-256",
                             "Ethos_U55_High_End_Embedded", "Shared_Sram", None, 16 * 1024,
                             1 << 20, ("cycles", "sram"), "default")  # fmt: skip
    return study, settings, SearchSpace(settings.sram_min, settings.sram_max)


def test_remembered_tickets_agree_with_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    mine = optuna.create_study(
        storage=open_storage(url, heartbeat=False), study_name="s", directions=["minimize"] * 2
    )
    seeds = [{"sram_units": 4096 * (k + 1)} for k in range(4)]
    assert issue(mine, 6, None, "test", seeds) == 6
    first = mine.get_trials(deepcopy=False)
    again = mine.get_trials(deepcopy=False)
    assert [t.state for t in first] == [optuna.trial.TrialState.WAITING] * 6
    assert [(t.number, t.params, t.system_attrs) for t in again] == [
        (t.number, t.params, t.system_attrs) for t in first
    ]
    assert all(a is not b for a, b in zip(first, again, strict=True))  # each read its own

    other = optuna.load_study(study_name="s", storage=open_storage(url, heartbeat=False))
    trial = other.ask()  # another worker claims the first ticket and finishes it
    trial.suggest_int("sram_units", 16, 1 << 20, log=True)
    other.tell(trial, [1.0, 2.0])
    taken = other.ask()  # and claims the second
    issue(other, 1, None, "test", [{"sram_units": 99}])

    fresh = optuna.load_study(study_name="s", storage=open_storage(url, heartbeat=False))
    assert _view(mine) == _view(fresh)
    states = [t.state for t in mine.get_trials(deepcopy=False)]
    assert states[:2] == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING]
    assert len(states) == 7 and taken.number == 1
    assert mine.get_trials(deepcopy=False)[0].values == [1.0, 2.0]


@pytest.mark.filterwarnings("ignore:Choices for a categorical")  # a tuple comes back a list
def test_a_claimed_trial_read_from_memory_shows_every_write(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(
        storage=open_storage(url, heartbeat=False), study_name="s", directions=["minimize"] * 2
    )
    issue(study, 2, None, "test")
    trial = study.ask()
    reader = open_storage(url, heartbeat=False)
    seen = []
    for name in ("a", "b"):
        trial.suggest_int(name, 0, 10)
        trial.suggest_categorical(f"{name}_kind", [(1, 2), "x", None])
        trial.set_user_attr(name, {"tuple": (1, 2.5)})  # JSON makes it a list
        trial.set_constraint(f"over_{name}", 1.5)
        running = study.get_trials(deepcopy=False)[trial.number]
        assert running == study.get_trials(deepcopy=False)[trial.number]  # unchanged
        seen.append((dict(running.params), dict(running.user_attrs)))
        # Read whole, from memory, it is what the database holds, and the caller's own.
        read = study._storage.get_trial(trial._trial_id)
        assert read == reader.get_trial(trial._trial_id)
        read.params["x"] = 1
        assert "x" not in study._storage.get_trial(trial._trial_id).params
    assert seen[1][0].keys() == {"a", "a_kind", "b", "b_kind"}
    assert seen[1][1] == {"a": {"tuple": [1, 2.5]}, "b": {"tuple": [1, 2.5]}}
    fresh = optuna.load_study(study_name="s", storage=open_storage(url, heartbeat=False))
    assert _view(study) == _view(fresh)
    study.tell(trial, [1.0, 2.0])
    assert _view(study) == _view(fresh)


def test_trials_run_with_the_collector_paused_and_their_garbage_still_goes(tmp_path: Path) -> None:
    class Node:
        pass

    alive: weakref.WeakSet[Node] = weakref.WeakSet()
    paused = []

    def evaluate(point: DesignPoint) -> Estimate:
        node = Node()
        node.me = node  # a cycle: only the collector frees it
        alive.add(node)
        paused.append(not gc.isenabled())
        pool = point.sram_pool_bytes
        return Estimate(pool, point.config().options, True, pool, 10**9 // pool)

    study, settings, space = _issued_study(tmp_path, 4)
    assert gc.isenabled()
    with ScoringPool(1, evaluate, lambda _settings: evaluate) as pool:
        run_studies([study_run(study, settings, space, None, True)], pool)
    assert paused == [True] * 4
    assert gc.isenabled()
    gc.collect()  # what the block made waits in the oldest generation (dse.gc_policy)
    assert not alive


def test_a_trial_handed_out_does_not_change_under_its_holder(tmp_path: Path) -> None:
    """Optuna's storage contract: what a read returned is the caller's. The storage keeps
    its own copy of a claimed trial and writes into that, never into one it handed out."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(
        storage=open_storage(url, heartbeat=False), study_name="s", directions=["minimize"] * 2
    )
    issue(study, 2, None, "test")
    waiting = study.get_trials(deepcopy=False)[0]
    trial = study.ask()
    held = study._storage.get_trial(trial._trial_id)
    trial.set_user_attr("metrics", {"cycles": 1})
    trial.suggest_int("sram_units", 16, 1 << 20, log=True)
    assert held.user_attrs == {} and held.params == {}
    assert waiting.state == optuna.trial.TrialState.WAITING and waiting.user_attrs == {}
    now = study._storage.get_trial(trial._trial_id)
    assert now.user_attrs == {"metrics": {"cycles": 1}} and "sram_units" in now.params


class _InterruptedRecorder(TrialRecorder):
    """A recorder whose store of a scored trial's results meets Ctrl-C."""

    def finish(self, trial, point, estimate, seconds) -> list[float]:
        raise KeyboardInterrupt


def test_ctrl_c_while_a_scored_trial_is_recorded_leaves_it_to_a_rerun(tmp_path: Path) -> None:
    """The trial being recorded when Ctrl-C comes is failed and its point issued again, so a
    rerun still runs every trial asked for."""
    study, settings, space = _issued_study(tmp_path, 3)

    def evaluate(point: DesignPoint) -> Estimate:
        pool = point.sram_pool_bytes
        return Estimate(pool, point.config().options, True, pool, 10**9 // pool)

    run = study_run(study, settings, space, None, True)
    run.recorder = _InterruptedRecorder(settings, space)
    pool = ScoringPool(1, evaluate, lambda _settings: evaluate)
    with pool, pytest.raises(KeyboardInterrupt):
        run_studies([run], pool)
    trials = study.get_trials(deepcopy=False)
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    waiting = [t for t in trials if t.state == optuna.trial.TrialState.WAITING]
    assert len(failed) == 1 and len(waiting) == 3  # two never asked, and the failed one again
    assert any(t.system_attrs.get("fixed_params") == failed[0].params for t in waiting)


class _InterruptedSampler(optuna.samplers.RandomSampler):
    """A sampler that meets Ctrl-C while it prepares the second trial: its ticket is claimed
    (running) but it has no point yet, as when front refinement looks for a step."""

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.number == 1:
            raise KeyboardInterrupt
        super().before_trial(study, trial)


def test_ctrl_c_between_a_claim_and_its_point_leaves_no_trial_running(tmp_path: Path) -> None:
    """The ticket claimed when Ctrl-C comes inside `ask` is given back like a scored one:
    a rerun runs it, and no trial is left running for a heartbeat to find stale."""
    study, settings, space = _issued_study(tmp_path, 3)

    def evaluate(point: DesignPoint) -> Estimate:
        pool = point.sram_pool_bytes
        return Estimate(pool, point.config().options, True, pool, 10**9 // pool)

    run = study_run(study, settings, space, _InterruptedSampler(seed=0), True)
    pool = ScoringPool(1, evaluate, lambda _settings: evaluate)
    with pool, pytest.raises(KeyboardInterrupt):
        run_studies([run], pool)
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert sorted(s.name for s in states) == ["COMPLETE", "FAIL", "WAITING", "WAITING"]
