"""Which layers of a point run together in one cascade: per plan of its schedule, in the order
the plans run, each layer with its stripe count and how its output is buffered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from cascader.ir.schedule import Schedule, Stripe
from dse.sizes import format_size

__all__ = [
    "CASCADE_COLUMNS",
    "Cascade",
    "CascadeLayer",
    "cascade_map",
    "cascade_rows",
]


@dataclass(frozen=True)
class CascadeLayer:
    """One layer of a cascade: its name in the model and operator (type and index), the NPU
    ops it runs as (several for a decomposed softmax), their stripes, and how its output is
    held (its last NPU op's output buffer)."""

    name: str
    operator: str
    npu_ops: int
    stripes: int
    buffer: str
    buffer_bytes: int


@dataclass(frozen=True)
class Cascade:
    """One plan of the schedule: the layers it runs (more than one: a cascade)."""

    plan: int
    layers: tuple[CascadeLayer, ...]


def cascade_map(schedule: Schedule, layer: Callable[[int], tuple[str, str]]) -> list[Cascade]:
    """The plans of `schedule` with their layers in the order each first runs;
    `layer(part)` gives a part's layer: its name and operator."""
    order: dict[int, dict[tuple[str, str], dict[int, list[Stripe]]]] = {}
    for step in schedule.steps:
        if isinstance(step, Stripe):
            parts = order.setdefault(step.plan, {}).setdefault(layer(step.part), {})
            parts.setdefault(step.part, []).append(step)
    cascades = []
    for plan, layers in order.items():
        rows = []
        for (name, operator), parts in layers.items():
            buf = schedule.buffers[list(parts.values())[-1][-1].ofm_buffer]
            stripes = sum(len(s) for s in parts.values())
            rows.append(CascadeLayer(name, operator, len(parts), stripes, _mode(buf), buf.size))
        cascades.append(Cascade(plan, tuple(rows)))
    return cascades


def _mode(buf) -> str:
    """How a layer's output is held: whole, as the window a stripe writes (its consumers
    recompute what they need), or as a rolling buffer of rows."""
    if buf.kind == "rolling":
        return f"rolling, {buf.rows} rows ({buf.area})"
    if buf.kind == "window":
        return f"recompute window ({buf.area})"
    return f"whole tensor ({buf.area})"


CASCADE_COLUMNS = ("cascade", "layer", "operator", "NPU ops", "stripes", "output buffer", "bytes")


def cascade_rows(cascades: list[Cascade]) -> list[tuple[str, ...]]:
    """One row per layer (CASCADE_COLUMNS), the cascade's number and size on its first.
    Consecutive one-layer plans of the same layer (the NPU ops of a decomposed softmax run
    as plans of their own) share a row numbered with their range: NPU ops and stripes
    summed, the last one's output buffer."""
    rows: list[tuple[str, ...]] = []
    run: tuple[int, CascadeLayer] | None = None  # the last row's one-layer plans
    for number, cascade in enumerate(cascades, start=1):
        if len(cascade.layers) > 1:
            size = len(cascade.layers)
            for k, layer in enumerate(cascade.layers):
                rows.append(_row(f"{number} ({size} layers)" if k == 0 else "", layer))
            run = None
            continue
        layer = cascade.layers[0]
        if run is not None and (run[1].name, run[1].operator) == (layer.name, layer.operator):
            held = run[1]
            layer = replace(
                layer, npu_ops=held.npu_ops + layer.npu_ops, stripes=held.stripes + layer.stripes
            )
            run = (run[0], layer)
            rows[-1] = _row(f"{run[0]}-{number}", layer)
        else:
            run = (number, layer)
            rows.append(_row(str(number), layer))
    return rows


def _row(label: str, layer: CascadeLayer) -> tuple[str, ...]:
    cells = (layer.name, layer.operator, str(layer.npu_ops), str(layer.stripes))
    return (label, *cells, layer.buffer, format_size(layer.buffer_bytes))
