"""The front figures: cycles against SRAM used (every study), and DRAM traffic against SRAM
used (a study whose points move feature maps through DRAM: the U65's Dedicated_Sram, where
SRAM is a cache in front of the arena).

Both draw the study's trials faintly, the ones that do not fit their pool more faintly still,
the front bold, Vela's own points (its `--optimise Performance` compiles at the study's
budgets and its `--optimise Size` point) when the study has a baseline, and the budgets the
reader gives. A few slow outliers would flatten the front against the bottom of the axes, so
the cycle axis is fitted to the front, Vela and the budgets, and trials above it are drawn as
marks on its top edge with their count."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from dse.plots.figure import (
    KIB,
    ZERO_DRAWN,
    ZERO_NOTE,
    Plot,
    count_formatter,
    cycles_axis,
    drawn_bytes,
    log_range,
    save,
    size_axis,
    size_label,
)
from dse.vela_points import SIZE, optimise

__all__ = ["Budgets", "FrontData", "dram_plot", "front_plot"]

_VELA_STYLE = {
    ("regor", "Performance"): ("s", "tab:orange", "Vela 5.2 at the same arena cache sizes"),
    ("legacy-python", "Performance"): ("D", "tab:brown", "Vela 5.2 legacy core, same sizes"),
    ("regor", "Size"): ("*", "tab:green", "Vela 5.2 --optimise Size"),
    ("legacy-python", "Size"): ("P", "tab:olive", "Vela 5.2 legacy core --optimise Size"),
}
_HEADROOM = 0.3  # of the fitted range, above its top, before trials are clipped


@dataclass(frozen=True)
class Budgets:
    """The reader's limits, drawn as lines: SRAM bytes and inference cycles."""

    sram: tuple[int, ...] = ()
    cycles: tuple[int, ...] = ()


@dataclass(frozen=True)
class FrontData:
    """What a front figure draws: estimate objects (a trial's metrics) of the feasible
    trials, of those that do not fit, and of the front; Vela's stored points."""

    name: str
    feasible: list[dict]
    infeasible: list[dict]
    front: list[dict]
    vela: list[dict]

    @property
    def lower_bound(self) -> int | None:
        """The model's SRAM lower bound as the trials stored it (None when none did, or
        when it is 0: the arena is not in SRAM, and a log axis has no 0)."""
        for m in self.feasible + self.infeasible:
            if m.get("sram_lower_bound_bytes"):
                return m["sram_lower_bound_bytes"]
        return None

    @property
    def clock_hz(self) -> float | None:
        for m in self.feasible:
            if m.get("inference_time_s"):
                return m["total_cycles"] / m["inference_time_s"]
        return None


def _sram(rows: list[dict]) -> list[float]:
    return [drawn_bytes(r["sram_used_bytes"]) for r in rows]


def _cycles(rows: list[dict]) -> list[float]:
    return [r["total_cycles"] for r in rows]


def _fitted_top(data: FrontData, budgets: Budgets) -> float | None:
    """The top of the cycle axis when some trials lie far above the front, Vela and the
    budgets (None: every trial fits on the axes as they are)."""
    core = _cycles(data.front) + [v["cycles_total"] for v in data.vela] + list(budgets.cycles)
    if not core:
        return None
    low, high = min(core), max(core)
    top = high + _HEADROOM * max(high - low, 0.1 * high)
    drawn = _cycles(data.feasible) + _cycles(data.infeasible)
    return top if any(c > top for c in drawn) else None


def _clipped(ax: Axes, rows: list[dict], top: float, color: str) -> int:
    """Rows above `top` as marks on the top edge; returns how many."""
    above = [r for r in rows if r["total_cycles"] > top]
    if above:
        ax.scatter(
            _sram(above),
            [top] * len(above),
            marker="^",
            s=30,
            color=color,
            alpha=0.8,
            clip_on=False,
            zorder=4,
        )
    return len(above)


def _vela(ax: Axes, vela: list[dict], y: str) -> list[float]:
    """Vela's points by core and strategy; returns their SRAM for the axis range."""
    xs = []
    for (core, strategy), (marker, color, label) in _VELA_STYLE.items():
        rows = [v for v in vela if v["core"] == core and optimise(v) == strategy and y in v]
        if not rows:
            continue
        rows.sort(key=lambda v: v["sram_used_bytes"])
        size = 160 if strategy == SIZE else 36
        ax.plot(
            _sram(rows),
            [v[y] for v in rows],
            marker=marker,
            ls="none",
            color=color,
            markersize=size**0.5,
            label=label,
            zorder=5,
        )
        xs += _sram(rows)
    return xs


def _budget_lines(ax: Axes, budgets: Budgets, horizontal: bool) -> None:
    for sram in budgets.sram:
        ax.axvline(sram, color="tab:purple", ls="--", lw=1)
        ax.annotate(
            f"SRAM budget {sram / KIB:.4g} KiB",
            (sram, 1),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=7,
            color="tab:purple",
        )
    if horizontal:
        for cycles in budgets.cycles:
            ax.axhline(cycles, color="tab:purple", ls="--", lw=1)
            ax.annotate(
                f"latency budget {cycles:,} cycles",
                (0.01, cycles),
                xycoords=("axes fraction", "data"),
                va="bottom",
                fontsize=7,
                color="tab:purple",
            )


def front_plot(data: FrontData, budgets: Budgets, out: Path) -> Plot:
    """Cycles (and inference time) against SRAM used."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    on_front = {id(m) for m in data.front}
    others = [m for m in data.feasible if id(m) not in on_front]
    ax.scatter(_sram(others), _cycles(others), s=12, color="0.55", alpha=0.35, label="trials")
    if data.infeasible:
        ax.scatter(
            _sram(data.infeasible),
            _cycles(data.infeasible),
            s=14,
            marker="x",
            color="tab:red",
            alpha=0.2,
            label="does not fit its pool",
        )
    if data.front:
        ax.step(_sram(data.front), _cycles(data.front), where="post", color="tab:blue", lw=1.5)
        ax.scatter(
            _sram(data.front),
            _cycles(data.front),
            s=30,
            color="tab:blue",
            zorder=3,
            label="cascader-dse front",
        )
    xs = _sram(data.feasible) + _sram(data.infeasible) + _vela(ax, data.vela, "cycles_total")
    xs += list(budgets.sram)
    _budget_lines(ax, budgets, horizontal=True)
    if data.lower_bound is not None:
        ax.axvline(data.lower_bound, color="tab:brown", ls=":", lw=1.2,
                   label=f"SRAM lower bound {size_label(data.lower_bound)}: no schedule "
                   "needs less")  # fmt: skip
        xs.append(data.lower_bound)
    top = _fitted_top(data, budgets)
    if top is not None:
        kept = [c for c in _cycles(data.feasible) + _cycles(data.infeasible) if c <= top]
        low = min(kept + _cycles(data.front) + [v["cycles_total"] for v in data.vela])
        bottom = low - 0.05 * (top - low)
        clipped = _clipped(ax, others, top, "0.4") + _clipped(ax, data.infeasible, top, "tab:red")
        ax.set_ylim(bottom, top)
        ax.annotate(
            f"{clipped} slower trial{'s' if clipped > 1 else ''} above, drawn on the top edge",
            (0.99, 0.99),
            xycoords="axes fraction",
            ha="right",
            va="top",
            fontsize=8,
        )
    ax.set_xscale("log")
    if xs:
        low, high = log_range(min(xs), max(xs))
        ax.set_xlim(low, high)
        size_axis(ax.xaxis, low, high)
    ax.set_xlabel("SRAM used" + (ZERO_NOTE if min(xs, default=1) == ZERO_DRAWN else ""))
    cycles_axis(ax, data.clock_hz)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(f"{data.name}: inference cycles vs SRAM used")
    return save(fig, out, "front", "Pareto front: inference cycles and time vs SRAM used")


def _dram(rows: list[dict]) -> list[float]:
    return [r["bytes"].get("dram", 0.0) for r in rows]


def _sram_dram_front(rows: list[dict]) -> list[dict]:
    """The points no other one beats in both SRAM used and DRAM traffic."""
    kept: list[dict] = []
    for row in sorted(rows, key=lambda r: (r["sram_used_bytes"], r["bytes"].get("dram", 0.0))):
        if not kept or row["bytes"].get("dram", 0.0) < kept[-1]["bytes"].get("dram", 0.0):
            kept.append(row)
    return kept


def has_dram_traffic(data: FrontData) -> bool:
    return any(_dram(data.feasible))


def dram_plot(data: FrontData, budgets: Budgets, out: Path) -> Plot:
    """DRAM bytes per inference against SRAM used, each trial coloured by its cycles."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    if data.infeasible:
        ax.scatter(
            _sram(data.infeasible),
            [d / KIB**2 for d in _dram(data.infeasible)],
            s=14,
            marker="x",
            color="tab:red",
            alpha=0.2,
            label="does not fit its pool",
        )
    shown = ax.scatter(
        _sram(data.feasible),
        [d / KIB**2 for d in _dram(data.feasible)],
        s=16,
        c=_cycles(data.feasible),
        cmap="viridis",
        alpha=0.8,
        label="trials",
    )
    fig.colorbar(shown, ax=ax, label="inference cycles", format=count_formatter())
    front = _sram_dram_front(data.feasible)
    ax.step(
        _sram(front),
        [d / KIB**2 for d in _dram(front)],
        where="post",
        color="black",
        lw=1.2,
        label="front of SRAM and DRAM traffic",
    )
    vela = [v | {"dram_mib": v["dram_bytes"] / KIB**2} for v in data.vela if "dram_bytes" in v]
    xs = _sram(data.feasible) + _sram(data.infeasible) + _vela(ax, vela, "dram_mib")
    xs += list(budgets.sram)
    _budget_lines(ax, budgets, horizontal=False)
    ax.set_xscale("log")
    if xs:
        low, high = log_range(min(xs), max(xs))
        ax.set_xlim(low, high)
        size_axis(ax.xaxis, low, high)
    ax.set_xlabel("SRAM used" + (ZERO_NOTE if min(xs, default=1) == ZERO_DRAWN else ""))
    ax.set_ylabel("DRAM traffic per inference (MiB read + written)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{data.name}: DRAM traffic vs SRAM used")
    return save(fig, out, "front_dram", "DRAM traffic vs SRAM used (SRAM as a cache of DRAM)")
