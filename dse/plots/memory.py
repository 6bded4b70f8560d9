"""The memory timeline of one point: SRAM bytes live at each schedule step, stacked by kind of
buffer, the free bytes under the highest buffer on top (so the stack's top is the highest
address in use), the pool as a line, the cascades along the time axis, the peak named."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from dse.plots.figure import KIB, Plot, save, short_name, size_label
from dse.timeline import FREE, KINDS, Timeline

__all__ = ["memory_plot"]

_COLOURS = dict(
    zip(
        KINDS,
        ("tab:blue", "tab:orange", "tab:green", "tab:olive", "tab:cyan", "tab:red"),
        strict=True,
    )
)
_PEAK_LISTED = 5


def _peak_text(timeline: Timeline) -> str:
    held = sorted(timeline.peak_buffers, key=lambda b: -b.size)
    lines = [
        f"highest address {size_label(timeline.peak)} (SRAM used) at step {timeline.peak_step}",
        f"({short_name(timeline.step_labels[timeline.peak_step], 50)})",
        f"most bytes live {size_label(timeline.live_peak)} at step {timeline.live_peak_step}: "
        f"{size_label(timeline.fragmentation)} lost to gaps",
        "live at the highest address:",
    ]
    lines += [f"{size_label(b.size):>9}  {short_name(b.name, 40)}" for b in held[:_PEAK_LISTED]]
    if len(held) > _PEAK_LISTED:
        lines.append(f"and {len(held) - _PEAK_LISTED} smaller buffers")
    return "\n".join(lines)


def memory_plot(timeline: Timeline, trial_number: int, out: Path) -> Plot:
    fig, (ax, strip) = plt.subplots(
        2, 1, figsize=(11, 6), sharex=True, gridspec_kw={"height_ratios": [12, 1], "hspace": 0.05}
    )
    steps = list(range(timeline.steps))
    kinds = [k for k in (*KINDS, FREE) if any(timeline.bytes_by_kind[k])]
    layers = [[v / KIB for v in timeline.bytes_by_kind[k]] for k in kinds]
    colours = [_COLOURS.get(k, "0.9") for k in kinds]
    stacks = ax.stackplot(steps, layers, labels=kinds, colors=colours, step="post", alpha=0.85)
    for kind, stack in zip(kinds, stacks, strict=True):
        if kind == FREE:
            stack.set_hatch("///")
            stack.set_edgecolor("0.6")
    ax.axhline(timeline.pool / KIB, color="black", ls="--", lw=1.2, label="SRAM pool")
    peak = timeline.peak / KIB
    ax.plot([timeline.peak_step], [peak], marker="v", color="black", markersize=8)
    ax.annotate(
        _peak_text(timeline),
        (timeline.peak_step, peak),
        xytext=(0.99, 0.97),
        textcoords="axes fraction",
        ha="right",
        va="top",
        fontsize=7,
        family="monospace",
        bbox={"boxstyle": "round", "fc": "white", "alpha": 0.9},
        arrowprops={"arrowstyle": "->", "color": "0.3"},
    )
    ax.set_ylim(0, max(peak, timeline.pool / KIB) * 1.45)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.4g}"))
    ax.set_ylabel("SRAM live (KiB)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.set_title(f"trial {trial_number}: SRAM over the schedule", loc="left")
    for k, span in enumerate(timeline.cascades):
        cascade = span.layers > 1
        colour = "tab:purple" if cascade else ("0.75" if k % 2 else "0.85")
        strip.axvspan(span.first, span.last + 1, color=colour, alpha=0.8 if cascade else 1.0)
        if cascade and span.last - span.first > timeline.steps / 40:
            strip.text(
                (span.first + span.last + 1) / 2,
                0.5,
                str(span.layers),
                ha="center",
                va="center",
                fontsize=6,
                color="white",
            )
    strip.set_yticks([])
    strip.set_ylabel("plans", rotation=0, ha="right", va="center", fontsize=8)
    strip.set_xlim(0, max(timeline.steps, 1))
    strip.set_xlabel(strip_label(timeline))
    return save(fig, out, "memory", f"SRAM over the schedule of trial {trial_number}")


def strip_label(timeline: Timeline) -> str:
    """The plans strip's legend: only the colours it draws."""
    cascaded = any(span.layers > 1 for span in timeline.cascades)
    return (
        "schedule step (DMA copies and NPU stripes in order); "
        + ("purple: a cascade, with its layer count; " if cascaded else "")
        + "grey: one layer"
    )
