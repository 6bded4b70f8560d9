"""The study report: plots (PNG + SVG), a self-contained HTML page and a Markdown summary.

Images are embedded in the HTML as data URIs, so the page opens anywhere without the network
or the files beside it.
"""

from __future__ import annotations

import base64
import html
import io
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import optuna
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from optuna.trial import FrozenTrial, TrialState

from dse.cache_stats import describe, study_cache_stats
from dse.errors import BadInput
from dse.front import format_front, front_rows, pareto_front
from dse.sizes import format_size
from dse.study import StudySettings, load_settings
from dse.tickets import requested_trials
from dse.vela_points import vela_points

KIB = 1024.0
optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass
class Plot:
    name: str
    title: str
    png: bytes


def _save(fig: Figure, out: Path, name: str, title: str) -> Plot:
    """Write `name`.png and `name`.svg; keep the PNG bytes for embedding."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    fig.savefig(out / f"{name}.svg", bbox_inches="tight")
    plt.close(fig)
    (out / f"{name}.png").write_bytes(buf.getvalue())
    return Plot(name, title, buf.getvalue())


def _xy(trials: list[FrozenTrial]) -> tuple[list[float], list[float]]:
    return (
        [t.user_attrs["metrics"]["sram_used_bytes"] / KIB for t in trials],
        [t.user_attrs["metrics"]["total_cycles"] for t in trials],
    )


def front_plot(study: optuna.Study, out: Path) -> Plot:
    """Cycles against SRAM used: every trial faint, infeasible ones marked, the front bold,
    and Vela's own compiles at the same budgets beside it when the study has them."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    feasible = [t for t in complete if t.user_attrs["metrics"]["fits"]]
    infeasible = [
        t
        for t in complete
        if not t.user_attrs["metrics"]["fits"] and t.user_attrs["metrics"]["total_cycles"]
    ]
    front = pareto_front(study)
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.scatter(*_xy(feasible), s=12, color="0.6", alpha=0.4, label="trials")
    if infeasible:
        ax.scatter(
            *_xy(infeasible),
            s=16,
            marker="x",
            color="tab:red",
            alpha=0.4,
            label="does not fit its pool",
        )
    if front:
        ax.step(*_xy(front), where="post", color="tab:blue", lw=1.5)
        ax.scatter(*_xy(front), s=30, color="tab:blue", zorder=3, label="cascader-dse front")
    for core, marker in (("regor", "s"), ("legacy-python", "D")):
        rows = [p for p in vela_points(study) if p["core"] == core]
        if rows:
            ax.plot(
                [p["sram_used_bytes"] / KIB for p in rows],
                [p["cycles_total"] for p in rows],
                marker=marker,
                ls=":",
                color="tab:orange" if core == "regor" else "tab:brown",
                label=f"Vela 5.2 ({core}) at the same arena cache sizes",
            )
    ax.set_xscale("log")
    kib = FuncFormatter(lambda v, _: f"{v:.0f}")
    ax.xaxis.set_major_formatter(kib)
    ax.xaxis.set_minor_formatter(kib)
    ax.set_xlabel("SRAM used (KiB)")
    ax.set_ylabel("inference cycles")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{study.study_name}: cycles vs SRAM")
    return _save(fig, out, "front", "Pareto front: cycles vs SRAM used")


def layer_plot(trial: FrozenTrial, out: Path) -> Plot | None:
    """Per-layer cycles and bytes moved of one point, when its metrics carry per-op rows."""
    ops = trial.user_attrs["metrics"].get("ops") or []
    if not ops:
        return None
    names = [f"{i}: {op.get('kind', '?')}" for i, op in enumerate(ops)]
    cycles = [op.get("cycles", 0) / 1000 for op in ops]
    moved = [sum((op.get("bytes") or {}).values()) / KIB for op in ops]
    height = max(3.0, 0.22 * len(ops) + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, height), sharey=True)
    left.barh(names, cycles, color="tab:blue")
    left.set_xlabel("cycles (thousands)")
    right.barh(names, moved, color="tab:green")
    right.set_xlabel("bytes moved (KiB)")
    left.invert_yaxis()
    left.set_title(f"trial {trial.number}: per-layer cost", loc="left")
    return _save(fig, out, "layers", f"Per-layer cycles and memory traffic of trial {trial.number}")


def importances(study: optuna.Study) -> dict[str, dict[str, float]]:
    """Parameter importances per objective; empty when there are too few trials to say."""
    scored = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if all(math.isfinite(v) for v in t.values)
    ]
    if len(scored) < 4:
        return {}
    # Unscheduled points (infinite objectives) would swamp the analysis: judge the rest.
    finite = optuna.create_study(directions=study.directions)
    finite.add_trials(scored)
    found = {}
    for index, name in enumerate(load_settings(study).objectives):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found[name] = optuna.importance.get_param_importances(
                    finite, target=lambda t, i=index: t.values[i]
                )
        except (RuntimeError, ValueError, ZeroDivisionError):
            continue  # e.g. every trial has the same parameters
    return found


def importance_plot(found: dict[str, dict[str, float]], out: Path) -> Plot | None:
    if not found:
        return None
    params = sorted({p for imp in found.values() for p in imp})
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(params) * len(found) + 1.5))
    width = 0.8 / len(found)
    for k, (objective, imp) in enumerate(found.items()):
        ax.barh(
            [i + k * width for i in range(len(params))],
            [imp.get(p, 0.0) for p in params],
            height=width,
            label=objective,
        )
    ax.set_yticks([i + width * (len(found) - 1) / 2 for i in range(len(params))], params)
    ax.set_xlabel("importance")
    ax.legend()
    ax.set_title("Parameter importances")
    return _save(fig, out, "importances", "Parameter importances per objective")


def selected_trial(study: optuna.Study, trial: int | None) -> FrozenTrial | None:
    """The point whose layers are shown: the one asked for, else the fastest on the front."""
    if trial is not None:
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        found = next((t for t in complete if t.number == trial), None)
        if found is None:
            raise BadInput(f"study {study.study_name!r} has no completed trial {trial}")
        return found
    front = pareto_front(study)
    return min(front, key=lambda t: t.user_attrs["metrics"]["total_cycles"], default=None)


def _summary_lines(study: optuna.Study, settings: StudySettings) -> list[tuple[str, str]]:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    feasible = [t for t in complete if t.user_attrs["metrics"]["fits"]]
    lines = [
        (settings.source_kind, f"{settings.source_path} (sha256 {settings.source_sha256[:12]}…)"),
        ("device", f"{settings.accelerator}, {settings.system_config}, {settings.memory_mode}"),
        ("pool range", f"{format_size(settings.sram_min)} .. {format_size(settings.sram_max)}"),
        (
            "trials",
            f"{len(complete)} complete of {requested_trials(study)} requested, "
            f"{len(feasible)} fit their pool",
        ),
        ("sampler", settings.sampler),
    ]
    cache = describe(study_cache_stats(study))
    if cache:
        lines.append(("cache", cache))
    if feasible:
        floor = min(t.user_attrs["metrics"]["sram_used_bytes"] for t in feasible)
        lines.append(("smallest SRAM that fits", format_size(floor)))
    return lines


def _vela_table(study: optuna.Study) -> list[str]:
    rows = vela_points(study)
    if not rows:
        return []
    lines = ["| Vela core | arena cache size | SRAM used | cycles |", "|---|---:|---:|---:|"]
    lines += [
        f"| {p['core']} | {format_size(p['arena_cache_size'])} | "
        f"{format_size(p['sram_used_bytes'])} | {int(p['cycles_total']):,} |"
        for p in rows
    ]
    return lines


def _markdown(
    study: optuna.Study, settings: StudySettings, plots: list[Plot], front: str, imp: dict
) -> str:
    parts = [f"# dse report: {study.study_name}", ""]
    parts += [f"- **{k}**: {v}" for k, v in _summary_lines(study, settings)]
    parts += ["", "## Pareto front", "", "```", front, "```", ""]
    vela = _vela_table(study)
    if vela:
        parts += ["## Vela 5.2 at the same budgets", "", *vela, ""]
    for objective, values in imp.items():
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(values.items())[:4])
        parts.append(f"- importance for {objective}: {top}")
    parts += ["", *[f"![{p.title}]({p.name}.png)" for p in plots], ""]
    return "\n".join(parts)


def _html(study: optuna.Study, settings: StudySettings, plots: list[Plot], front: str) -> str:
    esc = html.escape
    items = "".join(
        f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in _summary_lines(study, settings)
    )
    figures = "".join(
        f"<figure><img alt='{esc(p.title)}' src='data:image/png;base64,"
        f"{base64.b64encode(p.png).decode()}'><figcaption>{esc(p.title)} "
        f"(<a href='{p.name}.svg'>SVG</a>)</figcaption></figure>"
        for p in plots
    )
    vela = _vela_table(study)
    vela_html = f"<h2>Vela 5.2 at the same budgets</h2><pre>{esc(chr(10).join(vela))}</pre>"
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>dse report: {esc(study.study_name)}</title><style>"
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "th{text-align:left;padding-right:1em}img{max-width:100%}"
        "pre{background:#f6f6f6;padding:.5em;overflow-x:auto}</style></head><body>"
        f"<h1>dse report: {esc(study.study_name)}</h1><table>{items}</table>"
        f"<h2>Pareto front</h2><pre>{esc(front)}</pre>"
        f"{vela_html if vela else ''}{figures}</body></html>\n"
    )


def write_report(study: optuna.Study, out: Path, trial: int | None = None) -> list[Path]:
    """Write report.html, summary.md and the plots into `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    settings = load_settings(study)
    imp = importances(study)
    chosen = selected_trial(study, trial)
    plots = [front_plot(study, out)]
    for plot in (layer_plot(chosen, out) if chosen else None, importance_plot(imp, out)):
        if plot is not None:
            plots.append(plot)
    rows = front_rows(pareto_front(study))
    front = format_front(rows) if rows else "(no feasible point yet)"
    (out / "report.html").write_text(_html(study, settings, plots, front))
    (out / "summary.md").write_text(_markdown(study, settings, plots, front, imp))
    names = ["report.html", "summary.md"] + [f"{p.name}.{e}" for p in plots for e in ("png", "svg")]
    return [out / n for n in names]
