"""`dse.study.TicketStorage` leans on names Optuna keeps private. Each is pinned here, on the
installed Optuna: that it still exists with the signature the storage overrides or calls, and
that Optuna still goes through each override. An Optuna upgrade that renames or moves one
fails here, naming it, instead of silently bypassing the storage. Then its thread safety: two
threads batching writes of their own trials at once."""

from __future__ import annotations

import importlib
import inspect
import threading
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.trial import TrialState

from dse.study import NoTicketLeft, TicketStorage, open_storage
from dse.tickets import ticket_storage

# RDBStorage methods TicketStorage overrides or calls, with their parameters.
_METHODS = {
    "_create_new_trial": ("self", "study_id", "template_trial"),
    "_get_trials": ("self", "study_id", "states", "included_trial_ids", "trial_id_greater_than"),
    "_set_trial_param": (
        "self", "trial_id", "param_name", "param_value_internal", "distribution",
        "previous_distribution",
    ),
    "_get_stale_trial_ids": ("self", "study_id"),
    "_get_prepared_new_trial": ("self", "study_id", "template_trial", "session"),
    "_set_trial_param_without_commit": (
        "self", "session", "trial_id", "param_name", "param_value_internal", "distribution",
        "previous_distribution",
    ),
    "_set_trial_attr_without_commit": ("self", "session", "model_cls", "trial_id", "key", "value"),
}  # fmt: skip
_MODELS = (
    "StudyModel",
    "StudyDirectionModel",
    "StudyUserAttributeModel",
    "StudySystemAttributeModel",
    "TrialModel",
    "TrialHeartbeatModel",
    "TrialUserAttributeModel",
    "TrialSystemAttributeModel",
)


def _moved(what: str) -> str:
    return (
        f"Optuna {optuna.__version__}: {what}; dse.study.TicketStorage relies on it (see its "
        "docstring): adapt the storage to this Optuna or pin the one it was written for"
    )


@pytest.mark.parametrize("name", sorted(_METHODS))
def test_rdb_storage_still_has_each_private_method_the_storage_uses(name: str) -> None:
    method = getattr(RDBStorage, name, None)
    assert callable(method), _moved(f"RDBStorage.{name} is gone")
    found = tuple(inspect.signature(method).parameters)
    assert found == _METHODS[name], _moved(f"RDBStorage.{name} now takes {found}")


def test_the_private_session_helper_and_table_models_are_where_the_storage_imports_them() -> None:
    storage_module = importlib.import_module("optuna.storages._rdb.storage")
    helper = getattr(storage_module, "_create_scoped_session", None)
    assert callable(helper), _moved("optuna.storages._rdb.storage._create_scoped_session moved")
    found = tuple(inspect.signature(helper).parameters)
    assert found == ("scoped_session", "ignore_integrity_error"), _moved(
        f"_create_scoped_session now takes {found}"
    )
    models = importlib.import_module("optuna.storages._rdb.models")
    for name in _MODELS:
        assert hasattr(models, name), _moved(f"optuna.storages._rdb.models.{name} is gone")
    for name in ("StudyModel", "TrialModel"):
        assert callable(getattr(getattr(models, name), "find_or_raise_by_id", None)), _moved(
            f"{name}.find_or_raise_by_id is gone"
        )


def _storage(tmp_path: Path, heartbeat: bool = False) -> TicketStorage:
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=heartbeat)
    assert isinstance(storage, TicketStorage)
    return storage


def _study(storage: TicketStorage, tickets: list[dict]) -> optuna.Study:
    study = optuna.create_study(storage=storage, study_name="s")
    storage.issue_tickets(study._study_id, ("request", {}), tickets, 0)
    return study


def test_a_study_reaches_the_storage_through_the_cache_backend(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    assert ticket_storage(_study(storage, [])) is storage, _moved(
        "the storage cache no longer keeps the storage as `_backend`"
    )


def test_ask_creates_trials_through_the_override(tmp_path: Path) -> None:
    study = _study(_storage(tmp_path), [{"x": 3}])
    trial = study.ask()  # the ticket, its parameter fixed (Optuna's "fixed_params")
    assert trial.suggest_int("x", 0, 10) == 3
    with pytest.raises(NoTicketLeft):  # no ticket left: Optuna asked `_create_new_trial`
        study.ask()


def test_reads_go_through_the_get_trials_override(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    study = _study(storage, [{"x": 1}, {"x": 2}])
    waiting = [t._trial_id for t in study.get_trials(states=(TrialState.WAITING,))]
    assert len(waiting) == 2
    assert sorted(storage._known[study._study_id]) == waiting


def test_suggestions_go_through_the_set_trial_param_override(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    study = _study(storage, [{}])
    other = RDBStorage(storage.url)
    trial = study.ask()
    with storage.batched(trial._trial_id):
        assert trial.suggest_int("x", 0, 10) in range(11)
        assert other.get_trial(trial._trial_id).params == {}  # held for the block
        assert "x" in storage.get_trial(trial._trial_id).params  # seen here at once
    assert "x" in other.get_trial(trial._trial_id).params
    other.engine.dispose()


def test_stale_trial_checks_go_through_the_override(tmp_path: Path) -> None:
    storage = _storage(tmp_path, heartbeat=True)
    study = _study(storage, [{}])
    table = optuna.storages._rdb.models.TrialModel
    with storage.engine.begin() as connection:  # a claim without its first heartbeat
        connection.execute(sqlalchemy.update(table).values(state=TrialState.RUNNING))
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        fail_stale_trials(study)  # the override gives it a heartbeat: its grace period starts now
    beats = optuna.storages._rdb.models.TrialHeartbeatModel
    with storage.engine.connect() as connection:
        assert (
            connection.execute(sqlalchemy.select(sqlalchemy.func.count(beats.trial_id))).scalar()
            == 1
        )


def test_metric_names_are_where_the_storage_writes_them(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    storage.create_dse_study("m", ["minimize"] * 2, {}, {"study:metric_names": ["a", "b"]})
    assert optuna.load_study(study_name="m", storage=storage).metric_names == ["a", "b"]


def test_two_threads_batch_their_own_trials_at_once(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    study = _study(storage, [{}, {}])
    trials = [study.ask(), study.ask()]
    study.get_trials(deepcopy=False)  # as before a suggestion: both claimed trials remembered
    other = RDBStorage(storage.url)
    opened, written = threading.Barrier(2), threading.Barrier(3)
    done = threading.Barrier(3)
    failures: list[BaseException] = []

    def run(trial: optuna.Trial) -> None:
        try:
            with storage.batched(trial._trial_id):
                opened.wait()  # both blocks open at once
                trial.set_user_attr("by", trial.number)
                written.wait()
                done.wait()
        except BaseException as err:  # the main thread reports it
            failures.append(err)
            for barrier in (opened, written, done):
                barrier.abort()

    threads = [threading.Thread(target=run, args=(t,)) for t in trials]
    for thread in threads:
        thread.start()
    written.wait()
    assert [other.get_trial(t._trial_id).user_attrs for t in trials] == [{}, {}]
    assert [storage.get_trial(t._trial_id).user_attrs for t in trials] == [
        {"by": t.number} for t in trials
    ]
    done.wait()
    for thread in threads:
        thread.join()
    assert not failures
    assert [other.get_trial(t._trial_id).user_attrs for t in trials] == [
        {"by": t.number} for t in trials
    ]
    other.engine.dispose()
