"""Exported design points: pick a trial, turn it into the versioned config JSON (with TVM and
Vela snippets), write it atomically, and load it back with validation."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from cascader.ethosu.vela_compiler import VelaOptions
from cascader.ir.units import ALIGN, align
from dse.config_schema import CONFIG_FORMAT, CONFIG_SCHEMA, CONFIG_VERSION, schema_errors
from dse.database import shown_url
from dse.errors import BadInput, NothingFits
from dse.evaluators import make_evaluator, model_session
from dse.inputs import MAX_CONFIG_BYTES, read_input
from dse.output import json_of_format, write_file
from dse.sizes import format_size
from dse.space import DesignPoint, align_down
from dse.study import StudySettings, load_settings, model_sha256


def feasible_trials(study: optuna.Study) -> list[FrozenTrial]:
    return [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.user_attrs.get("metrics", {}).get("fits")
    ]


def _metrics(trial: FrozenTrial) -> tuple[int, int]:
    m = trial.user_attrs["metrics"]
    return int(m["sram_used_bytes"]), round(m["total_cycles"])


def _pool(trial: FrozenTrial) -> int:
    return int(trial.user_attrs["config"]["sram_pool_bytes"])


def select_trial(
    study: optuna.Study,
    trial: int | None = None,
    max_sram: int | None = None,
    max_cycles: int | None = None,
    skip: frozenset[int] = frozenset(),
) -> FrozenTrial:
    """The trial to export: by number, the fastest within `max_sram` bytes of SRAM used, or
    the one using least SRAM within `max_cycles`; among equal points, the smallest pool.
    Trials numbered in `skip` are passed over (ones that cannot be built within the budget)."""
    feasible = [t for t in feasible_trials(study) if t.number not in skip]
    if trial is not None:
        found = [t for t in study.get_trials(deepcopy=False) if t.number == trial]
        if not found:
            last = len(study.trials) - 1
            raise BadInput(f"study {study.study_name!r} has no trial {trial} (trials 0..{last})")
        if found[0] not in feasible:
            raise BadInput(
                f"trial {trial} is {found[0].state.name.lower()} and not a point that fits; "
                "pick a trial from the front (`dse sweep` or `dse report` lists them)"
            )
        return found[0]
    if not feasible:
        raise NothingFits(f"study {study.study_name!r} has no feasible trial yet")
    if max_sram is not None:
        within = [t for t in feasible if _metrics(t)[0] <= max_sram]
        if not within:
            least = min(_metrics(t)[0] for t in feasible)
            raise NothingFits(
                f"no trial fits in {format_size(max_sram)} of SRAM; the smallest uses "
                f"{format_size(least)}"
            )
        return min(within, key=lambda t: (_metrics(t)[1], _metrics(t)[0], _pool(t), t.number))
    assert max_cycles is not None
    within = [t for t in feasible if _metrics(t)[1] <= max_cycles]
    if not within:
        fastest = min(_metrics(t)[1] for t in feasible)
        raise NothingFits(f"no trial meets {max_cycles:,} cycles; the fastest takes {fastest:,}")
    return min(within, key=lambda t: (_metrics(t)[0], _metrics(t)[1], _pool(t), t.number))


def _tvm_snippet(settings: StudySettings, point: DesignPoint) -> dict:
    """What this project's TVM flow takes for the point: the `ethos-u` target
    (`cascader.lowering.EthosuTarget.from_snippet`; options null for the cascader off) and the
    one workspace pool the cascader needs, set on the partitioned module before
    `relax_to_tir`. Lowered there, the cascader generates proposals for that pool, so it may
    choose another schedule than the sweep's (the `_dse.tflite` of `dse compile` is that)."""
    options = point.config().options
    return {
        "flow": "cascader.lowering.relax_to_tir",
        "target": {
            "accelerator": settings.accelerator,
            "system_config": settings.system_config,
            "memory_mode": settings.memory_mode,
            "vela_config": settings.vela_config,
            "options": None if options is None else options.to_json(),
        },
        "workspace_memory_pools": [{"pool_name": "SRAM", "size_hint_bytes": point.sram_pool_bytes}],
        "usage": (
            "mod = partition_for_ethosu(import_tflite(model)).with_attr("
            "'workspace_memory_pools', tvm['workspace_memory_pools']); "
            "relax_to_tir(mod, EthosuTarget.from_snippet(tvm))"
        ),
    }


VELA_NOTE = (
    "The vela_ini and vela_flags give Vela this SRAM budget: they are what Vela's own "
    "compiler does at it, not this point's schedule. The schedule scored here is the one "
    "`dse compile --config` writes as <model>_dse.tflite (Vela's file layout), the file to "
    "ship."
)


VELA_POINT_NOTE = (
    "This point is Vela's own schedule: vela_flags (with your model and --output-dir) rebuild "
    "it, and `dse compile --config` writes the same <model>_vela.tflite."
)


def _vela_ini_snippet(settings: StudySettings, point: DesignPoint) -> str:
    section = f"{settings.memory_mode}_dse"
    return (
        f"; cascader-dse: {settings.memory_mode} with the explored arena cache size: Vela's\n"
        "; own schedule at this budget; this point's schedule is <model>_dse.tflite.\n"
        f"; Use with --config <your vela.ini> --config <this file> --memory-mode {section}\n"
        f"[Memory_Mode.{section}]\n"
        f"inherit=Memory_Mode.{settings.memory_mode}\n"
        f"arena_cache_size={point.sram_pool_bytes}\n"
    )


def _vela_flags(settings: StudySettings, point: DesignPoint) -> list[str]:
    return [
        "--accelerator-config",
        settings.accelerator,
        "--config",
        settings.vela_config or "Arm/vela.ini",
        "--system-config",
        settings.system_config,
        "--memory-mode",
        settings.memory_mode,
        "--arena-cache-size",
        str(point.sram_pool_bytes),
    ]


def vela_options(settings: StudySettings, point: DesignPoint) -> VelaOptions:
    """The Vela compile that rebuilds a `vela` point."""
    return point.vela_options(settings.accelerator, settings.system_config,
                              settings.memory_mode, settings.vela_config)  # fmt: skip


def _vela_point(settings: StudySettings, point: DesignPoint) -> dict:
    """A `vela` point's own choices and the `vela` command that rebuilds it (into `out`)."""
    command = vela_options(settings, point).command_line(settings.source_path, "out")
    return {
        "optimise": point.vela_optimise,
        "disabled": list(point.vela_disabled),
        "tensor_allocator": point.vela_allocator,
        "command_line": command,
    }


def pool_within(study: optuna.Study, trial: FrozenTrial, budget: int) -> int:
    """The pool to export for a trial picked within `budget` bytes of SRAM: its own when that
    is within the budget, else the smallest of (the SRAM its schedule uses, the budget) at
    which the point builds exactly the trial's schedule (the same command streams and
    constants; for a graph study, the same proposal and figures). A sweep samples pools, so
    the trial's may lie far above what its schedule uses. A `vela` point keeps its own: its
    SRAM used is within the budget whatever arena size limit Vela was given."""
    pool = _pool(trial)
    if pool <= budget:
        return pool
    settings = load_settings(study)
    point = DesignPoint(**trial.user_attrs["config"])
    if point.producer == "vela":
        return pool  # Vela's arena limit is a compile option: another one is another schedule
    candidates = sorted({align(_metrics(trial)[0]), align_down(budget)})
    if settings.source_kind == "graph":
        evaluate = make_evaluator(settings)

        def figures(at: DesignPoint) -> dict:
            data = evaluate(at).to_json()
            data["cascader"].pop("seconds", None)
            return {k: v for k, v in data.items() if k != "sram_pool_bytes"}

        scored = figures(point)
        for candidate in candidates:
            if figures(replace(point, sram_pool_bytes=candidate)) == scored:
                return candidate
    else:
        session = model_session(settings)
        built = _build(session, point.config(settings.sram_max))
        for candidate in candidates:
            config = replace(point, sram_pool_bytes=candidate).config(settings.sram_max)
            if candidate >= ALIGN and _build(session, config) == built:
                return candidate
    raise NothingFits(
        f"trial {trial.number}'s schedule uses {format_size(_metrics(trial)[0])} but is not "
        f"built the same at a pool within {format_size(budget)}; export it with --trial "
        f"{trial.number} (pool {format_size(pool)}) or pick a larger budget"
    )


def _build(session, config) -> tuple:
    """What a firmware build gets of a point: its command streams and constants."""
    estimate, _, compiled = session.compile(config)
    streams = tuple(f.driver_payload for f in compiled.functions)
    return estimate.fits, streams, compiled.constants


def build_config(
    study: optuna.Study, trial: FrozenTrial, storage_url: str, pool: int | None = None
) -> dict:
    """The versioned config of one trial (with the SRAM pool `pool`, default the trial's:
    see `pool_within`); validated before it is returned."""
    settings = load_settings(study)
    point = DesignPoint(**trial.user_attrs["config"])
    if pool is not None:
        point = replace(point, sram_pool_bytes=pool)
    metrics = trial.user_attrs["metrics"]
    vela = point.producer == "vela"
    config = {
        "format": CONFIG_FORMAT,
        "version": CONFIG_VERSION,
        "model": {
            "kind": settings.source_kind,
            "path": settings.source_path,
            "sha256": settings.source_sha256,
        },
        "accelerator": settings.accelerator,
        "system_config": settings.system_config,
        "memory_mode": settings.memory_mode,
        "vela_config": settings.vela_config,
        "sram_pool_bytes": point.sram_pool_bytes,
        "producer": point.producer,
        **({"vela": _vela_point(settings, point)} if vela else {}),
        "cascader": {
            "enabled": point.enable_cascader and not vela,
            "options": point.cascader_options(),
            "proposal_region_bytes": max(settings.sram_max, point.sram_pool_bytes),
            **({} if point.enable_cascader or vela else {"buffer_weights": point.buffer_weights}),
            **({"narrow_nhwc": True} if point.narrow_nhwc and not vela else {}),
            **({"row_sum_mean": True} if point.row_sum_mean and not vela else {}),
        },
        "predicted": {
            "total_cycles": round(metrics["total_cycles"]),
            "sram_used_bytes": int(metrics["sram_used_bytes"]),
            "inference_time_s": metrics.get("inference_time_s"),
            "scored_by": metrics.get("scored_by", "vela"),
        },
        "study": {
            "name": study.study_name,
            "trial": trial.number,
            "storage": shown_url(storage_url),
        },
        "snippets": {
            "tvm": _tvm_snippet(settings, point),
            "vela_ini": _vela_ini_snippet(settings, point),
            "vela_flags": (
                _vela_point(settings, point)["command_line"][2:-2]
                if vela
                else _vela_flags(settings, point)
            ),
            "vela_note": VELA_POINT_NOTE if vela else VELA_NOTE,
        },
    }
    errors = schema_errors(config, CONFIG_SCHEMA)
    if errors:
        raise BadInput(f"trial {trial.number} cannot be exported: {errors[0]}")
    return config


def write_config(config: dict, path: Path) -> None:
    """Write through a temporary file and rename, so a failure leaves any old file intact."""
    write_file(path, json.dumps(config, indent=2) + "\n", json_of_format(CONFIG_FORMAT), "config")


def load_config(path: str | Path, model_path: str | Path | None = None) -> dict:
    """A config written by `dse export`, checked against the schema and, when `model_path` is
    given, against that model's sha256. Problems raise BadInput with a one-line message."""
    path = Path(path)
    hint = "write one with `dse export`"
    data = read_input(path, MAX_CONFIG_BYTES, "config", hint)
    try:
        config = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"config {path} is not text; {hint}") from None
    except json.JSONDecodeError as err:
        raise BadInput(
            f"config {path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from None
    except RecursionError:
        raise BadInput(f"config {path} nests too deeply to be a dse config; {hint}") from None
    except ValueError as err:  # an integer of thousands of digits: Python's message says
        reason = str(err).split(";")[0]  # how to raise its limit, which is no help here
        raise BadInput(f"config {path} is not a dse config ({reason}); {hint}") from None
    version = config.get("version") if isinstance(config, dict) else None
    if (
        isinstance(config, dict)
        and config.get("format") == CONFIG_FORMAT
        and version != CONFIG_VERSION
    ):
        raise BadInput(
            f"config {path} has version {version!r}; this dse reads version {CONFIG_VERSION}: "
            "export it again"
        )
    errors = schema_errors(config, CONFIG_SCHEMA)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise BadInput(f"config {path} is not a valid dse config: {errors[0]}{more}")
    if model_path is not None and model_sha256(model_path) != config["model"]["sha256"]:
        raise BadInput(
            f"config {path} was made for {config['model']['path']} (sha256 "
            f"{config['model']['sha256'][:12]}...), not for {model_path}; export one for this "
            "model"
        )
    return config


def exported_vela_options(config: dict) -> VelaOptions:
    """The Vela compile a `vela` point's exported config describes (its `vela` command)."""
    vela = config["vela"]
    return VelaOptions(config["accelerator"], config["system_config"], config["memory_mode"],
                       config.get("vela_config"), vela["optimise"], config["sram_pool_bytes"],
                       tuple(vela["disabled"]), vela["tensor_allocator"])  # fmt: skip


def point_args(args: argparse.Namespace, config: dict) -> argparse.Namespace:
    """`args` with the point flags replaced by the exported config's, so `dse compile` and
    `dse verify` rebuild exactly the schedule the config was scored with (a cascader point's;
    a `vela` point's config is built by Vela: `exported_vela_options`)."""
    assert config.get("producer", "cascader") == "cascader", (
        "a vela config: use exported_vela_options"
    )
    options = config["cascader"]["options"]
    return argparse.Namespace(
        **{
            **vars(args),
            "accelerator_config": config["accelerator"],
            "system_config": config["system_config"],
            "memory_mode": config["memory_mode"],
            "vela_config": config.get("vela_config"),
            "sram": config["sram_pool_bytes"],
            "proposal_region": config["cascader"]["proposal_region_bytes"],
            "no_cascade": not config["cascader"]["enabled"],
            "no_weight_buffering": not config["cascader"].get("buffer_weights", True),
            "narrow_nhwc": config["cascader"].get("narrow_nhwc", False),
            "row_sum_mean": config["cascader"].get("row_sum_mean", False),
            "no_striping": not options["enable_striping"],
            "multi_dimensional_striping": options["enable_multi_dimensional_striping"],
            "stripe_factors": options["stripe_factors"],
            "max_plan_size": options["max_plan_size"],
            "max_proposals": options["max_proposals"],
            "always_copy_size": options["always_copy_size"],
            # Configs exported before the cost model was a choice used the original's.
            "cost_model": options.get("cost_model", "tvm"),
        }
    )
