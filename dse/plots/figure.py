"""What every figure of the report shares: saving as PNG + SVG, readable size and cycle axes,
and short labels for the model's long tensor names."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

__all__ = [
    "KIB",
    "ZERO_DRAWN",
    "ZERO_NOTE",
    "Plot",
    "count_formatter",
    "cycles_axis",
    "drawn_bytes",
    "log_range",
    "save",
    "short_name",
    "size_axis",
    "size_label",
]

KIB = 1024.0
_MIN_TICKS, _MAX_TICKS = 5, 10
# A point using no SRAM (the arena in DRAM, weights read in place) is drawn here on the log
# SRAM axes, which have no 0, and the axis label says so.
ZERO_DRAWN = 256.0
ZERO_NOTE = f" (0 B drawn at {ZERO_DRAWN:.0f} B)"
# A log axis spans at least this ratio, so one point or a narrow front gets round ticks.
_MIN_SPAN = 4.0


def drawn_bytes(nbytes: float) -> float:
    """Where a byte count is drawn on a log axis (0 at ZERO_DRAWN)."""
    return nbytes if nbytes > 0 else ZERO_DRAWN


def log_range(low: float, high: float) -> tuple[float, float]:
    """The limits of a log axis around [low, high]: a margin each side, and at least
    _MIN_SPAN wide about the data's middle."""
    low, high = low / 1.15, high * 1.15
    if high / low < _MIN_SPAN:
        middle = (low * high) ** 0.5
        low, high = middle / _MIN_SPAN**0.5, middle * _MIN_SPAN**0.5
    return low, high


@dataclass(frozen=True)
class Plot:
    """A figure written as `name`.png and `name`.svg; the PNG bytes for embedding."""

    name: str
    title: str
    png: bytes


def save(fig: Figure, out: Path, name: str, title: str) -> Plot:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    fig.savefig(out / f"{name}.svg", bbox_inches="tight")
    plt.close(fig)
    (out / f"{name}.png").write_bytes(buf.getvalue())
    return Plot(name, title, buf.getvalue())


def size_ticks(low: float, high: float) -> list[float]:
    """Byte values for ticks across [low, high] on a log axis: powers of two; with the steps
    halfway (x1.5) when the range spans few of them; evenly spaced multiples of a power of
    two when it spans less than that. _MIN_TICKS to _MAX_TICKS of them."""
    low, high = max(low, 1.0), max(high, low * 1.01)
    first, last = math.floor(math.log2(low)), math.ceil(math.log2(high))
    powers = [2.0**k for k in range(first, last + 1)]
    ticks = [t for t in powers if low <= t <= high]
    if len(ticks) < _MIN_TICKS:
        ticks = sorted(t for p in powers for t in (p, 1.5 * p) if low <= t <= high)
    if len(ticks) < _MIN_TICKS:
        step = 2.0 ** math.floor(math.log2((high - low) / 4))
        ticks = [k * step for k in range(math.ceil(low / step), math.floor(high / step) + 1)]
    return ticks[:: math.ceil(len(ticks) / _MAX_TICKS)]


def size_axis(axis, low: float, high: float) -> None:
    """A log axis of bytes, ticked and labelled in KiB/MiB across [low, high]."""
    axis.set_major_locator(FixedLocator(size_ticks(low, high)))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: size_label(v)))


def size_label(nbytes: float) -> str:
    """A tick's bytes: 512 B, 96 KiB, 1.5 MiB."""
    for unit, scale in (("MiB", KIB * KIB), ("KiB", KIB)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:.4g} B"


def cycles_axis(ax: Axes, clock_hz: float | None, label: str = "inference cycles") -> None:
    """Cycles on the left in thousands or millions; inference time on the right when the
    core clock is known."""
    ax.yaxis.set_major_formatter(count_formatter())
    ax.set_ylabel(label)
    if clock_hz:
        right = ax.secondary_yaxis(
            "right", functions=(lambda c: c / clock_hz * 1e3, lambda ms: ms * clock_hz / 1e3)
        )
        right.set_ylabel("inference time (ms)")


def _count(value: float) -> str:
    """A count as ticks show it: 950, 12.5 k, 1.1 M."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g} M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.4g} k"
    return f"{value:.0f}"


def count_formatter() -> FuncFormatter:
    """Tick labels for counts (a formatter belongs to one axis, so one per axis)."""
    return FuncFormatter(lambda v, _: _count(v))


def short_name(name: str, width: int = 42) -> str:
    """A TFLite tensor name for a label: its first alias (TFLite joins the names of fused
    ops with ';'), its tail when still too long."""
    first = name.split(";")[0]
    return first if len(first) <= width else "…" + first[-(width - 1) :]
