"""Vela's own compiler at the study's SRAM budgets (`dse sweep --baseline vela`), and its
`--optimise Size` point, stored in the study so the report can draw them beside the front."""

from __future__ import annotations

import optuna

from cascader.ethosu.vela_baseline import VelaError, run_vela
from cascader.ir.units import align
from dse.errors import BadInput
from dse.front import pareto_front
from dse.sizes import format_size
from dse.study import StudySettings

VELA_ATTR = "dse.vela"
PERFORMANCE, SIZE = "Performance", "Size"
LADDER_MIN = 64 * 1024
LADDER_MAX = 4 * 1024 * 1024


def vela_points(study: optuna.Study) -> list[dict]:
    """Stored Vela results that compiled, by core, then the `--optimise Performance` points
    by arena cache size, then the Size point (rows stored before Size points were made have
    no "optimise": they are Performance points)."""
    rows = [r for r in study.user_attrs.get(VELA_ATTR, []) if "error" not in r]
    return sorted(rows, key=lambda r: (r["core"], optimise(r) == SIZE, r["arena_cache_size"] or 0))


def optimise(row: dict) -> str:
    """The `--optimise` strategy of a stored Vela point."""
    return row.get("optimise", PERFORMANCE)


def matched(front: list[dict], point: dict) -> bool:
    """Some front point (an estimate object) uses no more SRAM and no more cycles than the
    Vela point."""
    return any(
        p["sram_used_bytes"] <= point["sram_used_bytes"]
        and p["total_cycles"] <= point["cycles_total"]
        for p in front
    )


def count_matched(front: list[dict], points: list[dict]) -> int:
    return sum(matched(front, p) for p in points)


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
    """Compile the model with Vela at every budget not yet stored (`--optimise Performance`)
    and once with `--optimise Size` (its own arena cache size); returns the new rows. A
    compile Vela refuses is skipped (its message is kept in the row)."""
    if settings.source_kind != "model":
        raise BadInput("--baseline vela needs a study of a .tflite model (--model), not a graph")
    core = "legacy-python" if legacy else "regor"
    stored = study.user_attrs.get(VELA_ATTR, [])
    done = {(optimise(r), r["arena_cache_size"]) for r in stored if r["core"] == core}
    wanted = [(PERFORMANCE, budget) for budget in budgets] + [(SIZE, None)]
    new = [
        _compile(settings, core, strategy, budget)
        for strategy, budget in wanted
        if (strategy, budget) not in done
    ]
    if new:
        study.set_user_attr(VELA_ATTR, stored + new)
    return new


def _compile(settings: StudySettings, core: str, strategy: str, budget: int | None) -> dict:
    """One stored Vela point: its SRAM, cycles and DRAM traffic (or Vela's refusal)."""
    row = {"core": core, "optimise": strategy, "arena_cache_size": budget}
    try:
        result = run_vela(
            settings.source_path,
            settings.accelerator,
            settings.system_config,
            settings.memory_mode,
            optimise=strategy,
            arena_cache_size=budget,
            legacy=core == "legacy-python",
            config_path=settings.vela_config,
        )
    except VelaError as err:
        return row | {"error": str(err)}
    return row | {
        "sram_used_bytes": result.sram_used_bytes,
        "cycles_total": result.cycles_total,
        "cycles_npu": result.cycles_npu,
        "inference_time_s": result.inference_time_s,
        "dram_bytes": result.bytes["dram"],
    }


def arena_label(row: dict) -> str:
    """A Vela point's budget as the tables show it."""
    if optimise(row) == SIZE:
        return "--optimise Size"
    return format_size(row["arena_cache_size"])


def format_vela(rows: list[dict], front: list[dict]) -> str:
    """Vela's points as a table for the terminal, then how many of them the front matches."""
    lines = [f"Vela 5.2 at the same budgets ({len(rows)} compiles):"]
    lines += [f"{'core':>13}  {'arena cache':>15}  {'SRAM used':>11}  {'cycles':>12}  matched"]
    lines += [
        f"{r['core']:>13}  {arena_label(r):>15}  {format_size(r['sram_used_bytes']):>11}  "
        f"{int(r['cycles_total']):>12,}  {'yes' if matched(front, r) else 'no'}"
        for r in rows
    ]
    lines.append(
        f"the front matches {count_matched(front, rows)} of Vela's {len(rows)} points "
        "(no more SRAM and no more cycles)"
    )
    return "\n".join(lines)
