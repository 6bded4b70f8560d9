"""The Pareto front of a study: feasible, non-dominated trials, smallest SRAM first."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from dse.sizes import format_size


def pareto_front(
    study: optuna.Study | None, trials: list[optuna.trial.FrozenTrial] | None = None
) -> list[optuna.trial.FrozenTrial]:
    """The study's feasible (fitting) completed trials no other one dominates, as Optuna's
    `best_trials` picks them but without its deep copy of every trial (front refinement asks
    before most trials). `trials`: the study's trials when the caller has them already."""
    if trials is None:
        assert study is not None, "give the study or its trials"
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    feasible = sorted(
        (
            t
            for t in trials
            if t.state == TrialState.COMPLETE and t.user_attrs.get("metrics", {}).get("fits")
        ),
        key=lambda t: (*t.values, t.user_attrs["config"]["sram_pool_bytes"], t.number),
    )
    # Lexicographic order: only an earlier point can dominate a later one, and then one on
    # the front does. Equal objective values are one point; keep the smallest pool's trial.
    front: list[optuna.trial.FrozenTrial] = []
    for trial in feasible:
        if not any(_covers(kept.values, trial.values) for kept in front):
            front.append(trial)
    return sorted(
        front, key=lambda t: (t.user_attrs["metrics"]["sram_used_bytes"], t.values[0], t.number)
    )


def _covers(a: list[float], b: list[float]) -> bool:
    """`a` is no worse than `b` in every objective (dominates it, or equals it)."""
    return all(x <= y for x, y in zip(a, b, strict=True))


def front_progress(trials: list[optuna.trial.FrozenTrial]) -> str:
    """What a progress bar says of a front: its size and its fastest point."""
    if not trials:
        return "front empty"
    fastest = min(trials, key=lambda t: t.user_attrs["metrics"]["total_cycles"])
    metrics = fastest.user_attrs["metrics"]
    return (
        f"front {len(trials)}, fastest {round(metrics['total_cycles']):,} cycles at "
        f"{format_size(metrics['sram_used_bytes'])}"
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
        f"{'time (ms)':>9}  {'producer':>8}  {'striping':>8}  options"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        cfg = row["config"]
        producer = cfg.get("producer", "cascader")
        cascaded = cfg.get("enable_cascader", True) and producer == "cascader"
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
            else vela_choices(cfg)
            if producer == "vela"
            else "cascader off"
            if cfg.get("buffer_weights", True)
            else "cascader off, weights in place"
        )
        if cfg.get("narrow_nhwc", False):  # narrow feature maps stored NHWC
            options += " narrow=nhwc" if cascaded else ", narrow NHWC"
        if cfg.get("row_sum_mean", False):  # a mean's sum rows first
            options += " mean=rows" if cascaded else ", mean in rows"
        lines.append(
            f"{row['trial']:>5}  {format_size(row['sram_used_bytes']):>11}  "
            f"{format_size(cfg['sram_pool_bytes']):>11}  {round(row['total_cycles']):>12,}  "
            f"{(f'{time_ms * 1e3:.3f}' if time_ms is not None else '-'):>9}  {producer:>8}  "
            f"{striping:>8}  "
            f"{options}"
        )
    return "\n".join(lines)


def vela_choices(config: dict) -> str:
    """A `vela` point's choices as Vela's own flags name them."""
    flags = [f"--optimise {config['vela_optimise']}"]
    flags += [f"no {feature}" for feature in config["vela_disabled"]]
    if config["vela_allocator"] != "HillClimb":
        flags.append(f"--tensor-allocator {config['vela_allocator']}")
    return ", ".join(flags)


def lower_bound_fact(trials: list[optuna.trial.FrozenTrial]) -> str | None:
    """The model's SRAM lower bound as the cascader's trials stored it, and how it is
    reached (None before any such trial, or in a study stored without it)."""
    for trial in trials:
        metrics = trial.user_attrs["metrics"]
        if metrics.get("sram_lower_bound_bytes") is not None:
            return (
                f"{format_size(metrics['sram_lower_bound_bytes'])}: no schedule needs less; "
                f"{metrics['sram_lower_bound_derivation']}"
            )
    return None
