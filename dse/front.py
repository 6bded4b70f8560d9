"""The Pareto front of a study: feasible, non-dominated trials, smallest SRAM first."""

from __future__ import annotations

import optuna

from dse.sizes import format_size


def pareto_front(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Optuna's best trials already skip infeasible ones (constraint > 0)."""
    trials = sorted(
        study.best_trials,
        key=lambda t: (*t.values, t.user_attrs["config"]["sram_pool_bytes"], t.number),
    )
    # Equal objective values are one point; keep the trial that asked for the smallest pool.
    distinct = {tuple(t.values): t for t in reversed(trials)}
    return sorted(
        distinct.values(),
        key=lambda t: (t.user_attrs["metrics"]["sram_used_bytes"], t.values[0], t.number),
    )


def front_rows(trials: list[optuna.trial.FrozenTrial]) -> list[dict]:
    """One estimate object per front point, plus its trial number and config."""
    return [
        {**t.user_attrs["metrics"], "trial": t.number, "config": t.user_attrs["config"]}
        for t in trials
    ]


def format_front(rows: list[dict]) -> str:
    header = (
        f"{'trial':>5}  {'SRAM used':>11}  {'pool':>11}  {'cycles':>12}  "
        f"{'time (ms)':>9}  {'striping':>8}  options"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        cfg = row["config"]
        cascaded = cfg.get("enable_cascader", True)
        striping = (
            "-"
            if not cascaded
            else "off"
            if not cfg["enable_striping"]
            else ("multi-d" if cfg["enable_multi_dimensional_striping"] else "on")
        )
        time_ms = row.get("inference_time_s")
        options = (
            f"sf={cfg['stripe_factors']} mps={cfg['max_plan_size']} "
            f"mp={cfg['max_proposals']} acs={cfg['always_copy_size']}"
            f"{' cost=vela' if cfg.get('cost_model') == 'vela' else ''}"
            if cascaded
            else "cascader off"
        )
        lines.append(
            f"{row['trial']:>5}  {format_size(row['sram_used_bytes']):>11}  "
            f"{format_size(cfg['sram_pool_bytes']):>11}  {round(row['total_cycles']):>12,}  "
            f"{(f'{time_ms * 1e3:.3f}' if time_ms is not None else '-'):>9}  {striping:>8}  "
            f"{options}"
        )
    return "\n".join(lines)
