"""How the front converged: its hypervolume and the Vela points it matches, against trial
number and against wall seconds."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from dse.convergence import History
from dse.plots.figure import Plot, save

__all__ = ["convergence_plot", "convergence_title"]


def _panel(ax: Axes, rows, x: int, label: str, vela_points: int) -> None:
    xs = [row[x] for row in rows]
    ax.step(xs, [row[2] for row in rows], where="post", color="tab:blue")
    ax.set_xlabel(label)
    ax.set_ylabel("hypervolume (share of the reference box)", color="tab:blue")
    ax.set_ylim(0, max(row[2] for row in rows) * 1.15 or 1.0)
    ax.grid(True, alpha=0.3)
    if vela_points:
        right = ax.twinx()
        right.step(xs, [row[3] for row in rows], where="post", color="tab:orange")
        right.set_ylim(0, vela_points * 1.05)
        right.set_ylabel(f"Vela points matched (of {vela_points})", color="tab:orange")


def convergence_plot(history: History, out: Path) -> Plot:
    fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    _panel(by_trial, history.by_number, 0, "trial number", history.vela_points)
    _panel(
        by_time,
        history.by_time,
        1,
        "wall seconds since the first trial started",
        history.vela_points,
    )
    reached = history.first_match_of_all()
    if reached is not None:
        by_trial.axvline(reached[0], color="tab:orange", ls=":", lw=1)
        by_time.axvline(reached[1], color="tab:orange", ls=":", lw=1)
    fig.suptitle(convergence_title(history))
    fig.tight_layout()
    return save(fig, out, "convergence", "Convergence of the front over trials and seconds")


def convergence_title(history: History) -> str:
    """Names Vela's points only when the study holds some (`dse sweep --baseline vela`)."""
    vela = " and the Vela points it matches" if history.vela_points else ""
    return f"Convergence: the front's hypervolume{vela}"
