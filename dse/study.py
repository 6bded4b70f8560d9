"""Optuna studies: where they live, what fixed settings they carry, and how they are reopened."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Collection, Container, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from optuna.distributions import BaseDistribution, distribution_to_json, json_to_distribution
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages._rdb import models as rdb_models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from cascader.frontend.tflite_check import read_model
from dse.database import (
    check_sqlite_file,
    engine_kwargs,
    open_failure,
    run_failure,
    schema_lock,
    sqlite_path,
)
from dse.errors import BadInput
from dse.inputs import check_graph
from dse.sizes import format_size
from dse.stored import SETTINGS_ATTR, check_settings, check_study, read_stored

# A worker beats every HEARTBEAT_SECONDS; a running trial silent for GRACE_SECONDS is failed and
# re-queued (at most MAX_RETRIES times). DSE_HEARTBEAT_SECONDS / DSE_GRACE_SECONDS override them.
HEARTBEAT_SECONDS = 10
GRACE_SECONDS = 30
MAX_RETRIES = 2
OBJECTIVE_NAMES = ("cycles", "sram", "offchip")
# What optuna-dashboard calls each objective.
METRIC_NAMES = {"cycles": "cycles", "sram": "sram_bytes", "offchip": "offchip_bytes"}
# Where Optuna keeps a study's metric names (`Study.set_metric_names`; Optuna is pinned).
_METRIC_NAMES_ATTR = "study:metric_names"
# Ids one IN (...) of a ticket state query may list (SQLite allows 32766 bound values).
_MAX_IN_IDS = 10000


def model_sha256(path: str | Path) -> str:
    """The sha256 of a model file, read as the flow reads it (a regular file, size-capped)."""
    return hashlib.sha256(read_model(path)).hexdigest()


def source_sha256(kind: str, path: Path) -> str:
    """The sha256 of a study's model or graph file."""
    if kind == "model":
        return model_sha256(path)
    return hashlib.sha256(check_graph(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class StudySettings:
    """What is fixed for a whole study. Stored in the study so `dse worker` needs only the
    storage URL and the study name to run more trials."""

    source_kind: str  # "model" (a .tflite) or "graph" (a cascader graph JSON)
    source_path: str
    source_sha256: str
    accelerator: str
    system_config: str
    memory_mode: str
    vela_config: str | None
    sram_min: int
    sram_max: int
    objectives: tuple[str, ...]
    sampler: str
    # Who makes the points (dse.space.PRODUCERS); studies made before Vela's compiler was a
    # producer have only the cascader.
    producers: tuple[str, ...] = ("cascader",)

    def to_json(self) -> dict:
        data = asdict(self)
        data["objectives"] = list(self.objectives)
        data["producers"] = list(self.producers)
        return data

    @classmethod
    def from_json(cls, data: dict) -> StudySettings:
        return cls(
            **{
                **data,
                "objectives": tuple(data["objectives"]),
                "producers": tuple(data.get("producers", ("cascader",))),
            }
        )


def parse_objectives(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in OBJECTIVE_NAMES]
    if bad or len(set(names)) != len(names) or not {"cycles", "sram"} <= set(names):
        raise BadInput(
            f"bad --objectives {text!r}: give cycles,sram optionally followed by offchip "
            f"(valid names: {', '.join(OBJECTIVE_NAMES)})"
        )
    return names


def default_storage(out_dir: Path) -> str:
    return f"sqlite:///{(out_dir / 'study.db').resolve()}"


def heartbeat_seconds() -> tuple[int, int]:
    """(heartbeat interval, grace period) in seconds, from the environment when set there."""
    values = []
    for name, default in (
        ("DSE_HEARTBEAT_SECONDS", HEARTBEAT_SECONDS),
        ("DSE_GRACE_SECONDS", GRACE_SECONDS),
    ):
        text = os.environ.get(name, "")
        if text and not (text.isdigit() and int(text) > 0):
            raise BadInput(f"{name}={text!r} must be a positive whole number of seconds")
        values.append(int(text) if text else default)
    return values[0], values[1]


class NoTicketLeft(Exception):
    """Every issued trial is taken; a worker stops instead of inventing one more."""


def _copied(trial: FrozenTrial) -> FrozenTrial:
    """A trial with dicts of its own, as a read gives it: what this storage remembers is
    never what it hands out, so a later write it records in its copy (or a caller's write
    into the trial it got) changes no trial anyone else holds."""
    return FrozenTrial(
        number=trial.number,
        state=trial.state,
        value=None,
        values=None if trial.values is None else list(trial.values),
        datetime_start=trial.datetime_start,
        datetime_complete=trial.datetime_complete,
        params=dict(trial.params),
        distributions=dict(trial.distributions),
        user_attrs=dict(trial.user_attrs),
        system_attrs=dict(trial.system_attrs),
        intermediate_values=dict(trial.intermediate_values),
        trial_id=trial._trial_id,
    )


class TicketStorage(RDBStorage):
    """An RDB storage that runs only trials issued beforehand (enqueued WAITING trials).

    `Study.ask` creates a fresh trial when the queue looks empty, so workers racing for the last
    issued trial would overshoot the requested count. Refusing template-less creation makes a
    study end with exactly the trials that were asked for.

    What it remembers, per study: copies of the waiting tickets (Optuna lets nobody write a
    WAITING trial but its state) and of the trials this process claimed (a RUNNING trial is
    written only by its owner, and every owner's write goes through here: a parameter or
    attribute is written into the copy too, any other write forgets it). A copy is used only
    while the database still gives the trial the state it had when read, so a ticket claimed
    or finished by another process is read afresh. Each read hands out a copy of its own, as
    Optuna's storage contract asks.

    Thread safety (Optuna's contract: one storage may serve several threads, e.g. its heartbeat
    thread): the remembered trials and claims are shared and change under one lock; a
    `batched` block holds the writes of its own thread only.

    Optuna-private names it relies on (Optuna is pinned; `tests/dse/test_ticket_storage.py`
    pins each): the RDBStorage methods `_create_new_trial` and `_get_trials` (called by
    Optuna's storage cache), `_set_trial_param` (called by the cache and by
    `set_trial_param`), `_get_stale_trial_ids` (called by `fail_stale_trials`),
    `_get_prepared_new_trial`, `_set_trial_param_without_commit`,
    `_set_trial_attr_without_commit`; `optuna.storages._rdb.storage._create_scoped_session`
    and the table models of `optuna.storages._rdb.models`; the storage cache's `_backend`
    (`dse.tickets.ticket_storage`)."""

    def __init__(self, *args, **kwargs) -> None:
        self._lock = threading.RLock()
        self._known: dict[int, dict[int, FrozenTrial]] = {}
        self._claimed: set[int] = set()
        # Per thread: the trial of its open `batched` block and the writes held for it.
        self._batch = threading.local()
        super().__init__(*args, **kwargs)

    @contextlib.contextmanager
    def batched(self, trial_id: int) -> Iterator[None]:
        """The trial's parameter and attribute writes inside the block go to the database in
        one transaction at its end, as they would one by one (each read of the trial from
        this storage sees them at once, from its copy): a trial wrote a score of times, each
        its own transaction, which on a small model cost more than Vela compiling it."""
        writes: list[Callable[[Any], None]] = []
        self._batch.held = (trial_id, writes)
        try:
            yield
        finally:
            self._batch.held = None
            if writes:
                with _create_scoped_session(self.scoped_session, True) as session:
                    for write in writes:
                        write(session)

    def _held(self, trial_id: int, write: Callable[[Any], None]) -> bool:
        """Hold `write` (of a session) for the batch of `trial_id`; False when none is open."""
        held = getattr(self._batch, "held", None)
        if held is None or held[0] != trial_id:
            return False
        held[1].append(write)
        return True

    def claimed(self, trial_id: int) -> bool:
        """Whether this process claimed the trial: of the running ones, those it must finish
        or give back."""
        with self._lock:
            return trial_id in self._claimed

    def _create_new_trial(
        self, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        if template_trial is None:
            raise NoTicketLeft("no issued trial is waiting")
        return super()._create_new_trial(study_id, template_trial)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        """Claim a waiting trial with one conditional UPDATE. Optuna reads the state with
        SELECT ... FOR UPDATE, which SQLite ignores, so two worker processes could both take
        the same ticket and evaluate it twice; the UPDATE's row count decides the winner.
        The claim and its first heartbeat are one transaction: Optuna never finds a running
        trial without a heartbeat stale, so a worker killed between the two (the sampler
        runs before its heartbeat thread's first beat) would leave it running for ever."""
        if state != TrialState.RUNNING:
            self._forget(trial_id)
            return super().set_trial_state_values(trial_id, state, values)
        table = rdb_models.TrialModel
        claim = (
            sqlalchemy.update(table)
            .where(table.trial_id == trial_id, table.state == TrialState.WAITING)
            .values(state=TrialState.RUNNING, datetime_start=datetime.now())
            .execution_options(synchronize_session=False)
        )
        self._forget(trial_id)
        with _create_scoped_session(self.scoped_session) as session:
            claimed = session.execute(claim).rowcount == 1
            if claimed and self.get_heartbeat_interval() is not None:
                session.add(rdb_models.TrialHeartbeatModel(trial_id=trial_id))
        if claimed:
            with self._lock:
                self._claimed.add(trial_id)
        return claimed

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        """Optuna's stale trials, after giving every running trial without a heartbeat one
        (a claim made by a process killed between claiming and beating, before claims and
        first beats were one transaction): its clock starts now, and unless its process
        beats, it goes stale after the grace period and is retried like any other."""
        trials, beats = rdb_models.TrialModel, rdb_models.TrialHeartbeatModel
        unbeaten = sqlalchemy.select(trials.trial_id).where(
            trials.study_id == study_id,
            trials.state == TrialState.RUNNING,
            ~sqlalchemy.exists().where(beats.trial_id == trials.trial_id),
        )
        with _create_scoped_session(self.scoped_session, True) as session:
            for (trial_id,) in session.execute(unbeaten).all():
                session.add(beats(trial_id=trial_id))
        return super()._get_stale_trial_ids(study_id)

    def create_dse_study(
        self, name: str, directions: Sequence[str], user_attrs: dict, system_attrs: dict
    ) -> None:
        """Create study `name` with its attributes in one transaction: a process that sees
        the study sees its settings. DuplicatedStudyError when another made it first."""
        study = rdb_models.StudyModel(
            study_name=name,
            directions=[
                rdb_models.StudyDirectionModel(objective=i, direction=StudyDirection[d.upper()])
                for i, d in enumerate(directions)
            ],
        )
        try:
            with _create_scoped_session(self.scoped_session) as session:
                session.add(study)
                session.flush()
                for model, attrs in (
                    (rdb_models.StudyUserAttributeModel, user_attrs),
                    (rdb_models.StudySystemAttributeModel, system_attrs),
                ):
                    for key, value in attrs.items():
                        session.add(
                            model(study_id=study.study_id, key=key, value_json=json.dumps(value))
                        )
        except sqlalchemy.exc.IntegrityError:
            raise optuna.exceptions.DuplicatedStudyError(name) from None

    def issue_tickets(
        self, study_id: int, request: tuple[str, dict], tickets: Sequence[dict], seeds: int
    ) -> int:
        """Record a request (a study user attribute) and enqueue its tickets (WAITING trials
        fixing `tickets`' parameters) in one transaction, so a request is never recorded
        without its tickets or the other way round. The first `seeds` tickets are a new
        study's seed points: when the study has trials by the time the transaction holds
        its lock (another process seeded it first), they become empty tickets."""
        with _create_scoped_session(self.scoped_session) as session:
            rdb_models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
            if seeds:
                table = rdb_models.TrialModel
                first = session.execute(
                    sqlalchemy.select(table.trial_id).where(table.study_id == study_id).limit(1)
                ).first()
                if first is not None:
                    tickets = [{} for _ in range(seeds)] + list(tickets[seeds:])
            for params in tickets:
                template = optuna.trial.create_trial(
                    state=TrialState.WAITING, system_attrs={"fixed_params": params}
                )
                self._get_prepared_new_trial(study_id, template, session)
            key, value = request
            session.add(
                rdb_models.StudyUserAttributeModel(
                    study_id=study_id, key=key, value_json=json.dumps(value)
                )
            )
        return len(tickets)

    def _set_trial_param(
        self,
        trial_id: int,
        param_name: str,
        param_value_internal: float,
        distribution: BaseDistribution,
        previous_distribution: BaseDistribution | None,
    ) -> None:
        def write(session) -> None:
            self._set_trial_param_without_commit(
                session, trial_id, param_name, param_value_internal, distribution,
                previous_distribution,
            )  # fmt: skip

        if not self._held(trial_id, write):
            super()._set_trial_param(
                trial_id, param_name, param_value_internal, distribution, previous_distribution
            )
        # As a read gives it back: the distribution is stored as JSON.
        stored = json_to_distribution(distribution_to_json(distribution))
        with self._lock:
            trial = self._copy_of(trial_id)
            if trial is not None:
                trial.params[param_name] = stored.to_external_repr(param_value_internal)
                trial.distributions[param_name] = stored

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._set_attr(rdb_models.TrialUserAttributeModel, trial_id, key, value)
        with self._lock:
            trial = self._copy_of(trial_id)
            if trial is not None:  # stored as JSON, read back as JSON
                trial.user_attrs[key] = json.loads(json.dumps(value))

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._set_attr(rdb_models.TrialSystemAttributeModel, trial_id, key, value)
        with self._lock:
            trial = self._copy_of(trial_id)
            if trial is not None:
                trial.system_attrs[key] = json.loads(json.dumps(value))

    def _set_attr(self, model: type, trial_id: int, key: str, value: Any) -> None:
        def write(session) -> None:
            self._set_trial_attr_without_commit(session, model, trial_id, key, value)

        if not self._held(trial_id, write):
            with _create_scoped_session(self.scoped_session, True) as session:
                write(session)

    def get_trial_system_attrs(self, trial_id: int) -> dict[str, Any]:
        """From the copy of a trial this process runs (`Trial.set_constraint` reads them)."""
        found = self._running_copy(trial_id)
        if found is None:
            return super().get_trial_system_attrs(trial_id)
        return found.system_attrs

    def set_trial_intermediate_value(self, trial_id: int, step: int, value: float) -> None:
        self._forget(trial_id)
        super().set_trial_intermediate_value(trial_id, step, value)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        """The trial this process runs comes from its copy once read (see `__init__`):
        Optuna reads it whole for its constraints and again to tell it, each a query."""
        found = self._running_copy(trial_id)
        return super().get_trial(trial_id) if found is None else found

    def _running_copy(self, trial_id: int) -> FrozenTrial | None:
        """A copy of the remembered trial when this process runs it, else None."""
        with self._lock:
            found = self._copy_of(trial_id)
            if found is None or found.state != TrialState.RUNNING:
                return None
            return _copied(found)

    def _copy_of(self, trial_id: int) -> FrozenTrial | None:
        """The remembered trial itself (the caller holds the lock)."""
        for known in self._known.values():
            found = known.get(trial_id)
            if found is not None:
                return found
        return None

    def _forget(self, trial_id: int) -> None:
        with self._lock:
            for known in self._known.values():
                known.pop(trial_id, None)

    def _get_trials(
        self,
        study_id: int,
        states: Container[TrialState] | None,
        included_trial_ids: set[int],
        trial_id_greater_than: int,
    ) -> list[FrozenTrial]:
        """What Optuna's storage cache asks for before every suggestion: each trial not yet
        finished, read whole. With a hundred tickets issued a trial spent a third of a second
        re-reading them, and its own trial, at every suggestion. One query for the states of
        the asked trials instead; a trial read before whose state is unchanged (see
        the class) comes from memory, the rest are read. Under the lock throughout, so the
        states compared are the copies handed out."""
        with self._lock:
            return self._known_or_read(study_id, states, included_trial_ids, trial_id_greater_than)

    def _known_or_read(
        self,
        study_id: int,
        states: Container[TrialState] | None,
        included_trial_ids: set[int],
        trial_id_greater_than: int,
    ) -> list[FrozenTrial]:
        known = self._known.setdefault(study_id, {})
        asked = {i for i in included_trial_ids if i <= trial_id_greater_than}
        if states is not None or not known or len(asked) > _MAX_IN_IDS:
            return self._read_trials(study_id, states, asked, trial_id_greater_than)
        table = rdb_models.TrialModel
        rows = sqlalchemy.select(table.trial_id, table.state).where(
            table.study_id == study_id,
            sqlalchemy.or_(table.trial_id.in_(asked), table.trial_id > trial_id_greater_than),
        )
        with _create_scoped_session(self.scoped_session) as session:
            found = session.execute(rows).all()
        same = {i for i, state in found if i in known and known[i].state == state}
        newest = max((i for i, _ in found), default=trial_id_greater_than)
        rest = {i for i, _ in found if i not in same}
        # A trial made since the query is read next time, as if it had come just after.
        trials = self._read_trials(study_id, None, rest, newest) if rest else []
        return sorted([*trials, *(_copied(known[i]) for i in same)], key=lambda t: t._trial_id)

    def _read_trials(
        self,
        study_id: int,
        states: Container[TrialState] | None,
        included_trial_ids: set[int],
        trial_id_greater_than: int,
    ) -> list[FrozenTrial]:
        """Trials read whole; those that change only with their state are remembered."""
        trials = super()._get_trials(study_id, states, included_trial_ids, trial_id_greater_than)
        with self._lock:
            known = self._known.setdefault(study_id, {})
            for trial in trials:
                mine = trial.state == TrialState.RUNNING and trial._trial_id in self._claimed
                if trial.state == TrialState.WAITING or mine:
                    known[trial._trial_id] = _copied(trial)
                else:
                    known.pop(trial._trial_id, None)
        return trials


# The engines of the storages this process opened. An engine lives on in reference cycles
# after its storage is gone, its pooled connections open, until a collection frees it.
_ENGINES: list[weakref.ref[sqlalchemy.engine.Engine]] = []
_OPENED: list[str] = []  # their URLs, latest last


def close_storages() -> None:
    """Close the pooled database connections of every storage this process opened. A process
    that skips the collector at exit (`dse.gc_policy.before_exit`) must: a SQLite connection
    left open keeps the latest commits in the write-ahead log beside the study file."""
    for ref in _ENGINES:
        engine = ref()
        if engine is not None:
            engine.dispose()
    _ENGINES.clear()


def open_storage(url: str, heartbeat: bool = True, create: bool = True) -> RDBStorage:
    """An RDB storage with heartbeats, so trials of a killed worker are failed and retried;
    every wait on its database bounded (`dse.database`). A SQLite file is checked first
    (`dse.database.check_sqlite_file`); without `create` a missing one is refused rather than
    made (a command that only reads a study must not leave an empty database behind)."""
    kwargs: dict[str, Any] = {"engine_kwargs": engine_kwargs(url)}
    path = sqlite_path(url)
    try:
        with warnings.catch_warnings():
            # Heartbeats are marked experimental in Optuna 5; they are the documented way.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if heartbeat:
                interval, grace = heartbeat_seconds()
                kwargs |= {
                    "heartbeat_interval": interval,
                    "grace_period": grace,
                    "heartbeat_stale_trial_callback": RetryHeartbeatStaleTrialCallback(
                        max_retry=MAX_RETRIES
                    ),
                }
            storage = _made_storage(url, path, create, kwargs)
    except BadInput:
        raise
    except Exception as err:  # SQLAlchemy and the drivers raise many types
        raise open_failure(err, url) from None
    _ENGINES.append(weakref.ref(storage.engine))
    _OPENED.append(url)
    return storage


def _made_storage(
    url: str, path: Path | None, create: bool, kwargs: dict[str, Any]
) -> TicketStorage:
    """The storage, its tables made under the schema lock (`dse.database.schema_lock`). A
    SQLite file is checked under the lock too: another process may be making it, and until
    its tables are in, the file is empty."""
    if path is not None:
        with schema_lock(url):
            check_sqlite_file(path, create)
            storage = TicketStorage(url, **kwargs)
        _write_lock_first(storage.engine)
        return storage
    engine = sqlalchemy.create_engine(url, **kwargs["engine_kwargs"])
    try:
        with schema_lock(url, engine):
            return TicketStorage(url, **kwargs)
    finally:
        engine.dispose()


def storage_failure(error: BaseException) -> BadInput | None:
    """The one-line refusal for a database error raised while a command ran (the server went
    away, the file was damaged meanwhile), or None when `error` is not one."""
    failed = isinstance(
        error, sqlalchemy.exc.SQLAlchemyError | optuna.exceptions.StorageInternalError
    )
    return run_failure(error, _OPENED[-1]) if failed and _OPENED else None


def open_if_present(url: str) -> RDBStorage | None:
    """The storage at `url`, or None when it is a SQLite file not made yet: looking for a
    study there must not leave an empty database behind a command refused later."""
    path = sqlite_path(url)
    try:
        if path is not None:
            os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        pass  # open_storage says what is wrong with it
    return open_storage(url)


def _write_lock_first(engine: sqlalchemy.engine.Engine) -> None:
    """Every SQLite transaction of ours takes the write lock when it begins (BEGIN
    IMMEDIATE): a transaction that reads, then writes while another process writes, gets
    "database is locked" at once (SQLite will not wait: it would deadlock), whereas waiting
    at BEGIN uses the lock timeout. The journal is a write-ahead log, so readers (a report,
    an observer) never wait for a writer. A commit writes the log without waiting for the
    disk (synchronous NORMAL, safe with a write-ahead log: a power cut can lose the last
    commits, never the file), since a trial commits a score of times and each wait for the
    disk took 5 ms. Pooled connections are dropped so every one gets the hooks."""

    @sqlalchemy.event.listens_for(engine, "connect")
    def _driver_leaves_transactions_to_us(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    @sqlalchemy.event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()


# The settings a continued study keeps, and the flags that set them for a new one.
_KEPT_FLAGS = {
    "accelerator": "--accelerator-config",
    "system_config": "--system-config",
    "memory_mode": "--memory-mode",
    "vela_config": "--config",
    "sram_min": "--sram-min",
    "sram_max": "--sram-max",
    "objectives": "--objectives",
    "producers": "--producers",
}


def _flag_value(field: str, value: Any) -> str:
    if field in ("sram_min", "sram_max"):
        return format_size(value)
    if field in ("objectives", "producers"):
        return ",".join(value)
    return value or "(Vela's own)"


def continued_settings(
    name: str, stored: StudySettings, settings: StudySettings, given: Collection[str]
) -> StudySettings:
    """The settings study `name` runs with when continued: its own device, vela.ini, pool
    range and objectives, whatever the command line's defaults; the model where the command
    line found it; the sampler the command line names, else its own. `given` names the
    settings the command line set itself. A study of another model, or a kept setting given
    another value, is refused: it would change the space the sampler has learnt from, and the
    device and proposals earlier trials were scored with."""
    if stored.source_sha256 != settings.source_sha256:
        raise BadInput(
            f"study {name!r} was made for {stored.source_path} (sha256 "
            f"{stored.source_sha256[:12]}...), not for {settings.source_path}; use another "
            "--study name or --out directory"
        )
    for field, flag in _KEPT_FLAGS.items():
        theirs, ours = getattr(stored, field), getattr(settings, field)
        if field in given and theirs != ours:
            raise BadInput(
                f"study {name!r} was made with {flag} {_flag_value(field, theirs)}, not "
                f"{_flag_value(field, ours)}; drop {flag} to continue it, or use another "
                "--study name"
            )
    sampler = settings.sampler if "sampler" in given else stored.sampler
    return replace(stored, source_path=settings.source_path, sampler=sampler)


def _settings_in(name: str, attrs: dict[str, Any]) -> StudySettings:
    data = attrs.get(SETTINGS_ATTR)
    if data is None:
        raise BadInput(f"study {name!r} was not made by `dse sweep`; name a dse study")
    check_settings(name, data)
    return StudySettings.from_json(data)


def stored_settings(storage: RDBStorage, name: str) -> StudySettings | None:
    """The fixed settings of study `name`, or None when the storage holds no such study."""
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return None
    with read_stored(name):
        attrs = storage.get_study_user_attrs(study_id)
    return _settings_in(name, attrs)


def load_settings(study: optuna.Study) -> StudySettings:
    return _settings_in(study.study_name, study.user_attrs)


def load_study(storage: RDBStorage, name: str) -> optuna.Study:
    """Study `name`, checked to hold what dse stores (`dse.stored.check_study`)."""
    with read_stored(name):
        names = [s.study_name for s in storage.get_all_studies()]
    if name not in names:
        known = ", ".join(sorted(names)[:20]) or "none"
        raise BadInput(f"no study named {name!r} in this storage (studies there: {known})")
    with read_stored(name):
        study = optuna.load_study(study_name=name, storage=storage)
    return _checked(study)


def _checked(study: optuna.Study) -> optuna.Study:
    """`study` once everything stored in it has been read and checked: later reads of the
    same rows cannot fail."""
    with read_stored(study.study_name):
        load_settings(study)
        check_study(study)
    return study


def directions(objectives: tuple[str, ...]) -> list[str]:
    return ["minimize"] * len(objectives)


def create_or_continue(storage: RDBStorage, name: str, settings: StudySettings) -> optuna.Study:
    """Create the study with `settings`, or reopen it. For a study that exists, `settings` are
    what `continued_settings` made of its own (checked again: another process may have made
    the study since, even while this one tried to); the sampler they name replaces the
    stored one, for this run and every later one and worker. The sampler objects are built
    from the stored settings when trials run (driver.run_trials), so every process of a
    study samples alike. A new study is made with its settings and metric names in one
    transaction (`TicketStorage.create_dse_study`)."""
    stored = stored_settings(storage, name)
    if stored is None:
        metric_names = [METRIC_NAMES[o] for o in settings.objectives]
        try:
            storage.create_dse_study(
                name,
                directions(settings.objectives),
                {SETTINGS_ATTR: settings.to_json()},
                {_METRIC_NAMES_ATTR: metric_names},
            )
            return optuna.load_study(study_name=name, storage=storage)
        except optuna.exceptions.DuplicatedStudyError:  # made meanwhile: continue it
            stored = stored_settings(storage, name)
            if stored is None:  # not made meanwhile: rows of an earlier study are in the way
                raise BadInput(
                    f"study {name}: the database holds rows of a study whose own row is "
                    "missing (a damaged database); give another --out folder or --storage"
                ) from None
    continued_settings(name, stored, settings, _KEPT_FLAGS)
    study = _checked(optuna.load_study(study_name=name, storage=storage))
    if stored.sampler != settings.sampler:
        study.set_user_attr(SETTINGS_ATTR, replace(stored, sampler=settings.sampler).to_json())
    return study
