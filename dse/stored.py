"""What a dse study stores (its settings, requests and cache counts; each trial's point,
figures and ticket), as JSON Schemas, and the check that what a storage gives back is that.

A study's database may have been edited or damaged; every command reads it, and the front,
export, report and refinement index the stored JSON directly. So it is checked once when a
command opens the study, and a damaged entry is refused in one line naming it, before any
command writes to the study."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import optuna
import sqlalchemy
from optuna.trial import TrialState

from cascader.core.options import COST_MODELS
from cascader.ethosu.vela_arch import VELA_ACCELERATORS
from cascader.ethosu.vela_compiler import ALLOCATORS, FEATURES, OPTIMISE
from dse.config_schema import MAX_COUNT, MAX_POOL_BYTES, OPTION_RANGES, schema_errors
from dse.errors import BadInput
from dse.space import (
    ALWAYS_COPY_SIZES,
    MAX_PLAN_SIZES,
    MAX_PROPOSALS,
    PRODUCERS,
    SRAM_ALIGN,
    STRIPE_FACTORS,
    DesignPoint,
)

SETTINGS_ATTR = "dse.settings"  # the study's fixed settings (dse.study.StudySettings)
REQUEST_PREFIX = "dse.request."  # one `--trials` request each (dse.tickets)
# The keys dse.cache_stats and dse.vela_points write (they cannot be imported here: both
# import dse.study, which checks what it opens with this module).
CACHE_PREFIX = "dse.cache."
VELA_ATTR = "dse.vela"

_BYTES = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
_POOL = {"type": "integer", "minimum": 0, "maximum": MAX_POOL_BYTES}
_NUMBER = {"type": "number", "minimum": 0}
_MAYBE_NUMBER = {"type": ["number", "null"], "minimum": 0}
_NAME = {"type": "string", "minLength": 1}
_MAYBE_NAME = {"type": ["string", "null"]}
_FLAG = {"type": "boolean"}

SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "source_kind",
        "source_path",
        "source_sha256",
        "accelerator",
        "system_config",
        "memory_mode",
        "vela_config",
        "sram_min",
        "sram_max",
        "objectives",
        "sampler",
    ],
    "additionalProperties": False,
    "properties": {
        "source_kind": {"enum": ["model", "graph"]},
        "source_path": _NAME,
        "source_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "accelerator": {"enum": list(VELA_ACCELERATORS)},
        "system_config": _NAME,
        "memory_mode": _NAME,
        "vela_config": _MAYBE_NAME,
        "sram_min": {**_POOL, "minimum": 1},
        "sram_max": {**_POOL, "minimum": 1},
        "objectives": {"type": "array", "items": {"enum": ["cycles", "sram", "offchip"]}},
        "sampler": {"enum": ["default", "nsga2", "tpe", "grid"]},
        "producers": {"type": "array", "items": {"enum": list(PRODUCERS)}},
    },
}
_OPTION_SCHEMAS = {
    name: {"type": "integer", "minimum": low, "maximum": high}
    for name, (low, high) in OPTION_RANGES.items()
}
_FIRST_POINT_FIELDS = ("sram_pool_bytes", "enable_cascader", "enable_striping",
                       "enable_multi_dimensional_striping", *OPTION_RANGES,
                       "cost_model")  # fmt: skip
POINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    # Configs stored before the cascader-off weight buffering, the producers or the layout of
    # narrow feature maps were choices lack them.
    "required": [f.name for f in fields(DesignPoint) if f.name in _FIRST_POINT_FIELDS],
    "additionalProperties": False,
    "properties": {
        "sram_pool_bytes": _POOL,
        "enable_cascader": _FLAG,
        "enable_striping": _FLAG,
        "enable_multi_dimensional_striping": _FLAG,
        "buffer_weights": _FLAG,
        "narrow_nhwc": _FLAG,
        "row_sum_mean": _FLAG,
        **_OPTION_SCHEMAS,
        "cost_model": {"enum": list(COST_MODELS)},
        "producer": {"enum": list(PRODUCERS)},
        "vela_optimise": {"enum": list(OPTIMISE)},
        "vela_disabled": {"type": "array", "items": {"enum": list(FEATURES)}},
        "vela_allocator": {"enum": list(ALLOCATORS)},
    },
}
_OP_SCHEMA = {
    "type": "object",
    "required": ["name", "kind", "stripes", "cycles", "macs", "bytes"],
    "properties": {
        "name": {"type": "string"},
        "kind": {"type": "string"},
        "stripes": _BYTES,
        "cycles": _NUMBER,
        "macs": _BYTES,
        "bytes": {"type": "object"},
    },
}
METRICS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["sram_pool_bytes", "cascader", "fits", "sram_used_bytes", "total_cycles"],
    "properties": {
        "sram_pool_bytes": _POOL,
        "cascader": {
            "type": "object",
            "required": ["enabled", "options"],
            "properties": {"enabled": _FLAG, "options": {"type": "object"}},
        },
        "fits": _FLAG,
        "sram_used_bytes": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_COUNT},
        "total_cycles": _MAYBE_NUMBER,
        "npu_cycles": _MAYBE_NUMBER,
        "macs": {"type": ["integer", "null"], "minimum": 0},
        "inference_time_s": _MAYBE_NUMBER,
        "bytes": {"type": "object"},
        "host_ops": {"type": "array", "items": {"type": "string"}},
        "ops": {"type": "array", "items": _OP_SCHEMA},
        "scored_by": {"type": "string"},
        "producer": {"enum": list(PRODUCERS)},
    },
}
_REQUEST_SCHEMA = {
    "type": "object",
    "required": ["trials"],
    "properties": {"trials": {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}},
}
_CACHE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        name: {"type": "object", "required": ["hits", "misses"],
               "properties": {"hits": _BYTES, "misses": _BYTES}}
        for name in ("proposals", "scores", "results", "vela compiles")
    },
}  # fmt: skip
_VELA_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["core", "arena_cache_size"],
        "properties": {
            "core": {"type": "string"},
            "arena_cache_size": {**_POOL, "type": ["integer", "null"]},
            "sram_used_bytes": _BYTES,
            "cycles_total": _NUMBER,
        },
    },
}
# The values a ticket may fix, as the search space asks for them.
_TICKET_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "sram_units": {"type": "integer", "minimum": 1, "maximum": MAX_POOL_BYTES // SRAM_ALIGN},
        "enable_cascader": _FLAG,
        "enable_striping": _FLAG,
        "enable_multi_dimensional_striping": _FLAG,
        "stripe_factors": {"enum": list(STRIPE_FACTORS)},
        "max_plan_size": {"enum": list(MAX_PLAN_SIZES)},
        "max_proposals": {"enum": list(MAX_PROPOSALS)},
        "always_copy_size": {"enum": list(ALWAYS_COPY_SIZES)},
        "cost_model": {"enum": list(COST_MODELS)},
        "buffer_weights": _FLAG,
        "narrow_nhwc": _FLAG,
        "row_sum_mean": _FLAG,
        "producer": {"enum": list(PRODUCERS)},
        "vela_optimise": {"enum": list(OPTIMISE)},
        **{f"vela_disable_{feature.lower()}": _FLAG for feature in FEATURES},
        "vela_allocator": {"enum": list(ALLOCATORS)},
    },
}


@contextlib.contextmanager
def read_stored(study: str) -> Iterator[None]:
    """Reading study `study` from its storage: Optuna's own parsing of damaged rows (JSON it
    cannot decode or nests thousands deep, a state or value it does not know, a value it
    asserts on) becomes the one-line refusal."""
    logger = logging.getLogger(_OPTUNA_RDB_LOGGER)
    level = logger.level
    logger.setLevel(logging.ERROR)  # its "falling back" warning would be a second line
    try:
        yield
    except (ValueError, LookupError, TypeError, RecursionError, AssertionError) as err:
        reason = " ".join(str(err).split())[:120] or "it cannot be read"
        raise _refuse(study, f"{type(err).__name__}", reason) from None
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as err:
        if not _undecodable(err):
            raise  # the database itself failed: dse.database.run_failure says so
        raise _refuse(study, "text", "a stored value is not UTF-8") from None
    finally:
        logger.setLevel(level)


_OPTUNA_RDB_LOGGER = "optuna.storages._rdb.storage"


def _undecodable(error: BaseException | None) -> bool:
    """Whether SQLite refused a stored text as not UTF-8, anywhere in the error's causes."""
    while error is not None:
        if "Could not decode to UTF-8" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _refuse(study: str, where: str, problem: str) -> BadInput:
    return BadInput(
        f"study {study!r} has damaged stored data ({where}: {problem}); restore its database "
        "from a copy, or start a new study with another --study name"
    )


def check_settings(study: str, data: Any) -> None:
    errors = schema_errors(data, SETTINGS_SCHEMA, SETTINGS_ATTR)
    if errors:
        raise _refuse(study, "its settings", errors[0])


def check_study(study: optuna.Study) -> None:
    """Refuse `study` when anything dse stored in it is not what dse writes: its attrs, each
    finished trial's point, figures and objective values, each waiting ticket's point (and
    that it has not finished)."""
    name = study.study_name
    for key, value in study.user_attrs.items():
        schema = (
            SETTINGS_SCHEMA if key == SETTINGS_ATTR
            else _REQUEST_SCHEMA if key.startswith(REQUEST_PREFIX)
            else _CACHE_SCHEMA if key.startswith(CACHE_PREFIX)
            else _VELA_SCHEMA if key == VELA_ATTR
            else None
        )  # fmt: skip
        errors = schema_errors(value, schema, key) if schema is not None else []
        if errors:
            raise _refuse(name, f"study attribute {key!r}", errors[0])
    objectives = len(study.directions)
    for trial in study.get_trials(deepcopy=False):
        where = f"trial {trial.number}"
        if trial.state == TrialState.COMPLETE:
            for key, schema in (("config", POINT_SCHEMA), ("metrics", METRICS_SCHEMA)):
                errors = schema_errors(trial.user_attrs.get(key), schema, key)
                if errors:
                    raise _refuse(name, where, errors[0])
            if trial.values is None or len(trial.values) != objectives:
                raise _refuse(name, where, f"it has no {objectives} objective values")
            if not all(_is_number(v) for v in trial.values):
                shown = ", ".join(repr(v)[:20] for v in trial.values)
                raise _refuse(name, where, f"its objective values are {shown}, not numbers")
        if trial.state == TrialState.WAITING and (
            trial.values is not None or trial.datetime_complete is not None
        ):  # a finished trial set back to waiting: running it would clash with its own rows
            raise _refuse(name, where, "it waits to run but has already finished")
        # Every trial's, not only a waiting ticket's: refinement reads those of finished ones.
        fixed = trial.system_attrs.get("fixed_params", {})
        errors = schema_errors(fixed, _TICKET_SCHEMA, "fixed_params")
        if errors:
            raise _refuse(name, where, errors[0])


def _is_number(value: Any) -> bool:
    """A stored objective value: a number (infinite for a point that does not fit), not
    text, not NaN."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value
