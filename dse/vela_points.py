"""Vela's own compiler at the study's SRAM budgets (`dse sweep --baseline vela`), stored in the
study so the report can draw them beside the front."""

from __future__ import annotations

import optuna

from cascader.ethosu.vela_baseline import VelaError, run_vela
from cascader.ir.units import align
from dse.errors import BadInput
from dse.front import pareto_front
from dse.sizes import format_size
from dse.study import StudySettings

VELA_ATTR = "dse.vela"
LADDER_MIN = 64 * 1024
LADDER_MAX = 4 * 1024 * 1024


def vela_points(study: optuna.Study) -> list[dict]:
    """Stored Vela results that compiled, by core then arena cache size."""
    rows = [r for r in study.user_attrs.get(VELA_ATTR, []) if "error" not in r]
    return sorted(rows, key=lambda r: (r["core"], r["arena_cache_size"]))


def baseline_budgets(study: optuna.Study, settings: StudySettings) -> list[int]:
    """The SRAM each front point uses (16-byte aligned up) plus powers of two from 64 KiB to
    4 MiB within the study's pool range."""
    budgets = {align(t.user_attrs["metrics"]["sram_used_bytes"]) for t in pareto_front(study)}
    size = LADDER_MIN
    while size <= LADDER_MAX:
        if settings.sram_min <= size <= settings.sram_max:
            budgets.add(size)
        size *= 2
    return sorted(b for b in budgets if b > 0)


def run_baseline(
    study: optuna.Study, settings: StudySettings, budgets: list[int], legacy: bool = False
) -> list[dict]:
    """Compile the model with Vela at every budget not yet stored; returns the new rows.
    A budget Vela refuses is skipped (its message is kept in the row)."""
    if settings.source_kind != "model":
        raise BadInput("--baseline vela needs a study of a .tflite model (--model), not a graph")
    core = "legacy-python" if legacy else "regor"
    stored = study.user_attrs.get(VELA_ATTR, [])
    done = {r["arena_cache_size"] for r in stored if r["core"] == core}
    new = []
    for budget in budgets:
        if budget in done:
            continue
        try:
            result = run_vela(
                settings.source_path,
                settings.accelerator,
                settings.system_config,
                settings.memory_mode,
                arena_cache_size=budget,
                legacy=legacy,
                config_path=settings.vela_config,
            )
        except VelaError as err:
            new.append({"core": core, "arena_cache_size": budget, "error": str(err)})
            continue
        new.append(
            {
                "core": core,
                "arena_cache_size": budget,
                "sram_used_bytes": result.sram_used_bytes,
                "cycles_total": result.cycles_total,
                "cycles_npu": result.cycles_npu,
                "inference_time_s": result.inference_time_s,
            }
        )
    if new:
        study.set_user_attr(VELA_ATTR, stored + new)
    return new


def format_vela(rows: list[dict]) -> str:
    """Vela's points as a table for the terminal."""
    lines = [f"Vela 5.2 at the same budgets ({len(rows)} compiles):"]
    lines += [f"{'core':>13}  {'arena cache':>11}  {'SRAM used':>11}  {'cycles':>12}"]
    lines += [
        f"{r['core']:>13}  {format_size(r['arena_cache_size']):>11}  "
        f"{format_size(r['sram_used_bytes']):>11}  {int(r['cycles_total']):>12,}"
        for r in rows
    ]
    return "\n".join(lines)
