"""A workload's answer as the terminal shows it: per NPU configuration, the smallest SRAM at
which every model meets its budget and each model's latency and producer there; then the
configuration with the fewest MACs that meets them (within `--max-sram` when given)."""

from __future__ import annotations

from dse.sizes import format_size
from dse.workload import Workload
from dse.workload_answer import ConfigAnswer, ModelPoint, closest, fewest_macs


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g} ms"


def _cell(point: ModelPoint | None) -> str:
    return "no point" if point is None else f"{_ms(point.time_s)} {point.producer}"


def format_answers(workload: Workload, answers: list[ConfigAnswer], max_sram: int | None) -> str:
    models = [m.stem for m in workload.models]
    budgets = {m.stem: m.budget_s for m in workload.models}
    heads = [f"{m} ({'no budget' if budgets[m] is None else _ms(budgets[m])})" for m in models]
    width = max(len(a.label) for a in answers)
    lines = [
        f"Workload {workload.name}: {len(models)} model(s) x {len(answers)} NPU configuration(s)",
        f"{'NPU configuration':<{width}}  {'SRAM':>10}  " + "  ".join(f"{h:>22}" for h in heads),
    ]
    for a in answers:
        sram = format_size(a.sram) if a.sram is not None else "not met"
        cells = "  ".join(f"{_cell(a.points[m]):>22}" for m in models)
        lines.append(f"{a.label:<{width}}  {sram:>10}  {cells}")
        if a.missing:
            lines.append(f"{'':<{width}}  {'':>10}  over budget everywhere: {', '.join(a.missing)}")
    best = fewest_macs(answers, max_sram)
    within = f" within {format_size(max_sram)}" if max_sram is not None else ""
    if best is not None:
        lines.append(
            f"fewest MACs meeting every budget{within}: {best.label}, {best.macs} MACs, "
            f"SRAM {format_size(best.sram)}"
        )
    else:
        near = closest(answers, max_sram)
        if near is not None:
            lines.append(
                f"no configuration meets these budgets{within}; the closest is {near.label} "
                f"(its slowest model at {near.worst_ratio():.2f}x its budget)"
            )
    return "\n".join(lines)
