"""The workload's figures: per NPU configuration, the worst model's latency over its budget
against SRAM (one curve each; below 1 every model meets its budget), and each model's
latency against SRAM, one panel per model with a curve per configuration."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from dse.plots.figure import ZERO_NOTE, Plot, drawn_bytes, log_range, save, size_axis
from dse.workload_answer import ConfigAnswer, ModelFront


def _steps(front: ModelFront, srams: list[int]) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for s in srams:
        best = front.fastest_within(s)
        if best is not None:
            xs.append(drawn_bytes(s))
            ys.append(best.time_s * 1e3)
    return xs, ys


def _sram_axis(ax, srams: list[int]) -> None:
    if srams:
        low, high = log_range(drawn_bytes(srams[0]), drawn_bytes(srams[-1]))
        ax.set_xlim(low, high)
        size_axis(ax.xaxis, low, high)


def _srams(answers: list[ConfigAnswer]) -> list[int]:
    return sorted({p.sram for a in answers for f in a.fronts for p in f.points})


def workload_plot(answers: list[ConfigAnswer], out: Path) -> Plot:
    """One step curve per configuration of max over models of latency / budget."""
    fig, ax = plt.subplots(figsize=(8.5, 5))
    srams = _srams(answers)
    for i, a in enumerate(answers):
        color = f"C{i}"
        curve = [(drawn_bytes(s), r) for s, r in a.curve()]
        if curve:
            xs, ys = zip(*curve, strict=True)
            ax.step(xs, ys, where="post", marker=".", color=color,
                    label=f"{a.accelerator} ({a.memory_mode})")  # fmt: skip
        if a.sram is not None:
            ax.plot([drawn_bytes(a.sram)], [a.worst_ratio()], "o", color=color, ms=9, mfc="none")
    ax.axhline(1.0, color="black", lw=1, ls="--")
    ax.text(drawn_bytes(srams[0]) if srams else 1, 1.0, " every budget met below this line",
            va="bottom")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    _sram_axis(ax, srams)
    ax.set_xlabel("SRAM (the largest any model of the workload uses)"
                  + (ZERO_NOTE if srams and srams[0] == 0 else ""))  # fmt: skip
    ax.set_ylabel("slowest model's latency / its budget")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    title = "Worst latency over budget against SRAM, per NPU configuration (circle: the answer)"
    ax.set_title(title, fontsize=10)
    return save(fig, out, "workload", title)


def model_plots(answers: list[ConfigAnswer], out: Path) -> Plot:
    """Each model's fastest latency within an SRAM size, per configuration, with its budget."""
    models = [f.model for f in answers[0].fronts] if answers else []
    fig, axes = plt.subplots(len(models), 1, figsize=(8.5, 2.8 * max(1, len(models))),
                             squeeze=False)  # fmt: skip
    srams = _srams(answers)
    for ax, model in zip(axes[:, 0], models, strict=True):
        for a in answers:
            front = next(f for f in a.fronts if f.model == model)
            xs, ys = _steps(front, srams)
            if xs:
                ax.step(xs, ys, where="post", label=a.accelerator)
            budget = front.budget_s
        if budget is not None:
            ax.axhline(budget * 1e3, color="black", lw=1, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _sram_axis(ax, srams)
        ax.set_ylabel("ms")
        ax.set_title(f"{model}" + ("" if budget is None else f" (budget {budget * 1e3:.3g} ms)"),
                     fontsize=9)  # fmt: skip
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("SRAM")
    fig.tight_layout()
    return save(fig, out, "models", "Each model's latency against SRAM, per NPU configuration")
