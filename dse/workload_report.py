"""`dse report --workload`: the workload's answer as a page (report.html), a Markdown summary
and its figures (dse.plots.workload), from the same tables as the terminal's."""

from __future__ import annotations

from pathlib import Path

import optuna

from dse.plots.workload import model_plots, workload_plot
from dse.report_page import Report, Section, Table, markdown, page
from dse.sizes import format_size
from dse.workload_answer import ConfigAnswer, closest, fewest_macs, workload_answers


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g}"


def answer_table(answers: list[ConfigAnswer]) -> Table:
    models = [f.model for f in answers[0].fronts]
    columns = ("NPU", "memory", "MACs", "SRAM", *(f"{m} ms (producer)" for m in models))
    rows = []
    for a in answers:
        cells = []
        for m in models:
            p = a.points[m]
            cells.append("no point" if p is None else f"{_ms(p.time_s)} ({p.producer})")
        sram = format_size(a.sram) if a.sram is not None else f"not met ({', '.join(a.missing)})"
        memory = f"{a.system_config}, {a.memory_mode}"
        rows.append((a.accelerator, memory, str(a.macs), sram, *cells))
    intro = (
        "Per NPU configuration, the smallest SRAM at which every model meets its latency "
        "budget (the models share the arena), and each model's latency there with the "
        "producer of its schedule (cascader: this tool's; vela: Vela's own compiler). In a "
        "Dedicated_Sram memory mode the arena lives in DRAM and the SRAM is its cache, so "
        "such a configuration can meet budgets with little or no SRAM, given its DRAM."
    )
    return Table(intro, columns, "llrr" + "r" * len(models), rows)


def _budget_table(answers: list[ConfigAnswer]) -> Table:
    fronts = answers[0].fronts
    rows = [(f.model, _ms(f.budget_s) if f.budget_s else "none", f"{f.weight:g}") for f in fronts]
    return Table("The models and their budgets.", ("model", "budget ms", "weight"), "lrr", rows)


def write_workload_report(
    name: str, studies: list[optuna.Study], out: Path, max_sram: int | None
) -> list[Path]:
    answers = workload_answers(studies)
    best = fewest_macs(answers, max_sram)
    within = f" within {format_size(max_sram)}" if max_sram is not None else ""
    if best is not None:
        verdict = (
            f"{best.label}: the fewest MACs ({best.macs}) meeting every budget{within}, "
            f"at {format_size(best.sram)} of SRAM"
        )
    else:
        near = closest(answers, max_sram)
        verdict = f"no configuration meets these budgets{within}" + (
            f"; the closest is {near.label} (slowest model at {near.worst_ratio():.2f}x its budget)"
            if near is not None
            else ""
        )
    trials = sum(len(s.trials) for s in studies)
    report = Report(
        title=f"dse report: workload {name}",
        facts=[("answer", verdict), ("studies", str(len(studies))), ("trials", str(trials))],
        front="",
        front_figures=("workload",),
    )
    report.sections.append(Section("The answer", tables=[answer_table(answers)]))
    report.sections.append(Section("Each model", figures=("models",),
                                   tables=[_budget_table(answers)]))  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    report.plots += [workload_plot(answers, out), model_plots(answers, out)]
    (out / "report.html").write_text(page(report))
    (out / "summary.md").write_text(markdown(report))
    names = ["report.html", "summary.md"]
    names += [f"{p.name}.{ext}" for p in report.plots for ext in ("png", "svg")]
    return [out / n for n in names]
