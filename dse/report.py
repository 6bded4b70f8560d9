"""The study report: plots (PNG + SVG), a self-contained HTML page and a Markdown summary.

What an SoC architect reads at a glance: the front against Vela's own points and the reader's
budgets, where one chosen point's SRAM goes over its schedule and which layers it cascades,
its per-layer cost under the model's own names, and how the search converged. Images are
embedded in the HTML as data URIs, so the page opens anywhere without the network or the
files beside it."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from dse.cache_stats import describe, study_cache_stats
from dse.cascade_map import CASCADE_COLUMNS, cascade_rows
from dse.convergence import History, front_history
from dse.errors import BadInput
from dse.evaluators import model_session
from dse.front import format_front, front_rows, lower_bound_fact, pareto_front
from dse.plots.convergence import convergence_plot
from dse.plots.front import Budgets, FrontData, dram_plot, front_plot, has_dram_traffic
from dse.plots.importance import importance_plot, importances
from dse.plots.layers import layer_plot, layer_rows
from dse.plots.memory import memory_plot
from dse.point_view import PointView, point_view
from dse.report_page import Report, Section, Table, markdown, page
from dse.sizes import format_size
from dse.study import StudySettings, load_settings
from dse.tickets import requested_trials
from dse.vela_points import arena_label, matched, vela_points

__all__ = ["build_report", "selected_trial", "write_report"]

optuna.logging.set_verbosity(optuna.logging.WARNING)
NO_BUDGETS = Budgets()


def selected_trial(
    study: optuna.Study, trial: int | None, budgets: Budgets = NO_BUDGETS
) -> FrozenTrial | None:
    """The point shown in detail: the one asked for, else the knee of the front within the
    SRAM budgets (the smallest budget when several), else of the whole front (`knee`)."""
    if trial is not None:
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        found = next((t for t in complete if t.number == trial), None)
        if found is None:
            raise BadInput(f"study {study.study_name!r} has no completed trial {trial}")
        return found
    front = pareto_front(study)
    if budgets.sram:
        limit = min(budgets.sram)
        front = [t for t in front if t.user_attrs["metrics"]["sram_used_bytes"] <= limit] or front
    return knee(front)


# The knee of a front: the least SRAM within this share of the fastest point's cycles (half
# the SRAM for 0.7% more cycles is the point a user wants to see first).
KNEE_SLACK = 0.01


def knee(front: list[FrozenTrial]) -> FrozenTrial | None:
    """The front point using least SRAM whose cycles are within KNEE_SLACK of the fastest."""
    if not front:
        return None
    fastest = min(t.user_attrs["metrics"]["total_cycles"] for t in front)
    near = [
        t for t in front if t.user_attrs["metrics"]["total_cycles"] <= fastest * (1 + KNEE_SLACK)
    ]
    return min(near, key=lambda t: (t.user_attrs["metrics"]["sram_used_bytes"], t.number))


def _front_data(study: optuna.Study, complete: list[FrozenTrial]) -> FrontData:
    scored = [t.user_attrs.get("metrics") or {} for t in complete]
    scored = [m for m in scored if m.get("total_cycles") is not None]
    return FrontData(
        study.study_name,
        feasible=[m for m in scored if m["fits"]],
        infeasible=[m for m in scored if not m["fits"]],
        front=[t.user_attrs["metrics"] for t in pareto_front(study, complete)],
        vela=vela_points(study),
    )


def _facts(
    study: optuna.Study,
    settings: StudySettings,
    complete: list[FrozenTrial],
    history: History | None,
) -> list[tuple[str, str]]:
    feasible = [t for t in complete if t.user_attrs["metrics"]["fits"]]
    facts = [
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
        facts.append(("cache", cache))
    if feasible:
        floor = min(t.user_attrs["metrics"]["sram_used_bytes"] for t in feasible)
        facts.append(("smallest SRAM that fits", format_size(floor)))
    bound = lower_bound_fact(complete)
    if bound is not None:
        facts.append(("SRAM lower bound", bound))
    if history is not None and history.vela_points:
        facts.append(("Vela's points", _vela_convergence(history)))
    return facts


def _vela_convergence(history: History) -> str:
    reached = history.first_match_of_all()
    if reached is not None:
        number, seconds = reached
        return f"matched Vela's {history.vela_points} points at trial {number}, {seconds:.1f} s"
    hits = history.by_time[-1][3] if history.by_time else 0
    return f"matched {hits} of Vela's {history.vela_points} points"


def _vela_table(study: optuna.Study, front: list[dict]) -> Table:
    rows = [
        (
            p["core"],
            arena_label(p),
            format_size(p["sram_used_bytes"]),
            f"{int(p['cycles_total']):,}",
            "yes" if matched(front, p) else "no",
        )
        for p in vela_points(study)
    ]
    columns = ("Vela core", "arena cache size", "SRAM used", "cycles", "matched by the front")
    intro = "A Vela point is matched when a front point uses no more SRAM and no more cycles."
    return Table(intro, columns, "lrrrl", rows)


def _layer_table(ops: list[dict], vela: bool) -> Table:
    """The per-layer table; of a Vela point, what Vela's per-layer report gives (its NPU
    operations' cycles and MACs: no stripes or bytes per operation)."""
    columns = ["layer (TFLite output tensor)", "operator", "NPU ops", "stripes", "cycles",
               "MACs", "bytes moved"]  # fmt: skip
    rows = [
        [
            r["name"],
            r["operator"],
            str(r["npu_ops"]),
            str(r["stripes"]),
            f"{r['cycles']:,.0f}",
            f"{r['macs']:,}",
            format_size(round(r["bytes"])),
        ]
        for r in layer_rows(ops)
    ]
    if vela:
        del columns[6], columns[3]
        for row in rows:
            del row[6], row[3]
        intro = "Cost per TFLite operator, from Vela's own per-layer report."
    else:
        intro = "Cost per TFLite operator."
    align = "ll" + "r" * (len(columns) - 2)
    return Table(intro, tuple(columns), align, [tuple(row) for row in rows])


def _point_facts(trial: FrozenTrial) -> list[tuple[str, str]]:
    metrics, config = trial.user_attrs["metrics"], trial.user_attrs["config"]
    time_s = metrics.get("inference_time_s")
    return [
        ("trial", str(trial.number)),
        ("SRAM used", format_size(metrics["sram_used_bytes"])),
        ("SRAM pool", format_size(config["sram_pool_bytes"])),
        ("cycles", f"{round(metrics['total_cycles']):,}"),
        ("inference time", f"{time_s * 1e3:.3f} ms" if time_s is not None else "-"),
        ("made by", _cascader_label(config)),
    ]


def _cascader_label(config: dict) -> str:
    if config.get("producer", "cascader") == "vela":
        return "Vela's own compiler"
    notes = []
    if not config.get("enable_cascader", True):
        notes.append("layer by layer")
        if not config.get("buffer_weights", True):
            notes.append("weights read in place")
    if config.get("narrow_nhwc", False):
        notes.append("narrow feature maps NHWC")
    if config.get("row_sum_mean", False):
        notes.append("means summing rows first")
    made = "the cascader" if config.get("enable_cascader", True) else "the cascader off"
    return f"{made} ({', '.join(notes)})" if notes else made


def _peak_table(view: PointView) -> Table:
    timeline = view.timeline
    intro = (
        f"SRAM peaks at {format_size(timeline.peak)} at step {timeline.peak_step} of "
        f"{timeline.steps} ({timeline.step_labels[timeline.peak_step]}); the point reports "
        f"{format_size(view.sram_used_bytes)} of SRAM used. That is the highest address in "
        f"use; at most {format_size(timeline.live_peak)} is ever live (step "
        f"{timeline.live_peak_step}), so the allocation loses "
        f"{format_size(timeline.fragmentation)} to gaps between buffers. Buffers live at the "
        "highest address, by address:"
    )
    rows = [(b.name, b.kind, f"{b.address:,}", format_size(b.size)) for b in timeline.peak_buffers]
    return Table(intro, ("buffer", "kind", "address", "bytes"), "llrr", rows)


def _cascade_table(view: PointView) -> Table:
    intro = (
        "The plans of the schedule in the order they run: the layers of a plan with more "
        "than one run together in one cascade, stripe by stripe."
    )
    return Table(intro, CASCADE_COLUMNS, "lllrrlr", cascade_rows(view.cascades))


def _point_section(
    settings: StudySettings, chosen: FrozenTrial, out: Path, report: Report
) -> Section:
    """The chosen point: its facts, memory timeline, peak, cascade map and layers."""
    section = Section(
        f"The chosen point: trial {chosen.number}", _point_facts(chosen), ("memory", "layers")
    )
    if settings.source_kind != "model":
        report.notes.append("a graph study has no schedule to draw: no memory timeline")
    elif chosen.user_attrs["config"].get("producer") == "vela":
        report.notes.append(
            f"trial {chosen.number} is Vela's own schedule: its layers below are from Vela's "
            "per-layer report; its memory timeline and cascades are Vela's (`dse export "
            "--trial` gives the vela command; its --verbose-allocation prints them)"
        )
    else:
        try:
            view = point_view(settings, chosen, model_session(settings))
        except BadInput as err:
            report.notes.append(f"no memory timeline or cascade map: {err}")
        else:
            report.plots.append(memory_plot(view.timeline, chosen.number, out))
            section.tables.extend((_peak_table(view), _cascade_table(view)))
            if view.timeline.peak != view.sram_used_bytes:
                report.notes.append(
                    f"the rebuilt schedule of trial {chosen.number} peaks at "
                    f"{view.timeline.peak:,} B, but the trial recorded {view.sram_used_bytes:,} B"
                )
    ops = chosen.user_attrs["metrics"].get("ops") or []
    vela = chosen.user_attrs["config"].get("producer") == "vela"
    layers = layer_plot(chosen.number, ops, out, with_bytes=not vela)
    if layers is not None:
        report.plots.append(layers)
        section.tables.append(_layer_table(ops, vela))
    return section


def build_report(
    study: optuna.Study, out: Path, trial: int | None = None, budgets: Budgets = NO_BUDGETS
) -> Report:
    """Draw the figures into `out` and gather the tables."""
    settings = load_settings(study)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    history = front_history(complete, vela_points(study))
    front = front_rows(pareto_front(study, complete))
    report = Report(
        title=f"dse report: {study.study_name}",
        facts=_facts(study, settings, complete, history),
        front=format_front(front) if front else "(no feasible point yet)",
        front_figures=("front", "front_dram"),
    )
    data = _front_data(study, complete)
    report.plots.append(front_plot(data, budgets, out))
    if has_dram_traffic(data):
        report.plots.append(dram_plot(data, budgets, out))
    if data.vela:
        report.sections.append(
            Section("Vela 5.2 at the same budgets", tables=[_vela_table(study, front)])
        )
    chosen = selected_trial(study, trial, budgets)
    if chosen is not None:
        section = _point_section(settings, chosen, out, report)
        why = "asked for (--trial)" if trial is not None else (
            f"the knee: least SRAM within {KNEE_SLACK:.0%} of the fastest front point"
            + (" within the SRAM budget" if budgets.sram else "") + "; --trial N shows another"
        )  # fmt: skip
        section.facts.insert(0, ("why this point", why))
        report.sections.append(section)
    if history is not None:
        report.plots.append(convergence_plot(history, out))
    importance = importance_plot(importances(study, settings.objectives), out)
    if importance is not None:
        report.plots.append(importance)
    return report


def write_report(
    study: optuna.Study, out: Path, trial: int | None = None, budgets: Budgets = NO_BUDGETS
) -> list[Path]:
    """Write report.html, summary.md and the plots into `out`; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(study, out, trial, budgets)
    (out / "report.html").write_text(page(report))
    (out / "summary.md").write_text(markdown(report))
    names = ["report.html", "summary.md"]
    names += [f"{p.name}.{ext}" for p in report.plots for ext in ("png", "svg")]
    return [out / n for n in names]
