"""Where a point's SRAM goes over time: per schedule step, the bytes of each kind of buffer
live in SRAM, the highest address in use, the cascades the steps belong to, and the peak.

"Live" follows the allocator: a buffer holds its addresses from its first step to its last.
What a point reports as SRAM used is the extent of the SRAM area, the highest address any
buffer reaches; so besides the buffers' bytes each step shows the free bytes below its
highest live buffer (what the allocation leaves between buffers), and the peak of that top
line is the point's `sram_used_bytes`. An output written over the input it replaces shares
that input's addresses, one laid over the input it consumes some of them: shared bytes are
counted once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cascader.ir.schedule import Copy, Schedule, Stripe

__all__ = ["FREE", "KINDS", "CascadeSpan", "LiveBuffer", "Timeline", "memory_timeline"]

# Stacking order, bottom up; also the order in which a kind wins an address two buffers share.
KINDS = (
    "model I/O",
    "feature maps between cascades",
    "cascade intermediates",
    "rolling buffers",
    "feature-map copies",
    "copied weights and biases",
)
FREE = "free below the highest buffer"


@dataclass(frozen=True)
class LiveBuffer:
    """One buffer live in SRAM: what it holds, its kind, bytes and address."""

    name: str
    kind: str
    size: int
    address: int


@dataclass(frozen=True)
class CascadeSpan:
    """The steps of one plan of the schedule: a cascade when it runs more than one layer."""

    plan: int
    first: int
    last: int
    layers: int


@dataclass(frozen=True)
class Timeline:
    """SRAM over the steps of one schedule. `bytes_by_kind[k][s]`: bytes of kind k (KINDS,
    then FREE) live at step s; `top[s]`: the highest SRAM address in use at step s."""

    pool: int
    bytes_by_kind: dict[str, list[int]]
    top: list[int]
    cascades: tuple[CascadeSpan, ...]
    step_labels: tuple[str, ...]
    peak_step: int
    peak_buffers: tuple[LiveBuffer, ...]

    @property
    def steps(self) -> int:
        return len(self.top)

    @property
    def peak(self) -> int:
        """The highest address in use over the schedule: the point's SRAM used."""
        return max(self.top, default=0)

    def live(self, step: int) -> int:
        """The bytes of the buffers live at `step`."""
        return sum(self.bytes_by_kind[kind][step] for kind in KINDS)

    @property
    def live_peak_step(self) -> int:
        """The step at which the most bytes are live (the first such step)."""
        return max(range(self.steps), key=self.live, default=0)

    @property
    def live_peak(self) -> int:
        """The most bytes live at any step: what an allocation leaving no gaps would need."""
        return self.live(self.live_peak_step) if self.steps else 0

    @property
    def fragmentation(self) -> int:
        """The address peak beyond the most bytes ever live: what the allocation loses to
        gaps between buffers at its worst."""
        return self.peak - self.live_peak


def memory_timeline(schedule: Schedule, layer: Callable[[int], str]) -> Timeline:
    """The SRAM timeline of `schedule`; `layer(part)` names a part's layer (the model's name
    for it)."""
    steps = schedule.steps
    buffers = _sram_buffers(schedule, layer)
    starting: dict[int, list[int]] = {}
    for index, (buf, _) in buffers.items():
        starting.setdefault(min(max(buf.first, 0), len(steps) - 1), []).append(index)
    series = {kind: [0] * len(steps) for kind in (*KINDS, FREE)}
    top = [0] * len(steps)
    live: set[int] = set()
    peak: tuple[int, tuple[LiveBuffer, ...]] = (-1, ())
    for step in range(len(steps)):
        live.update(starting.get(step, ()))
        live = {i for i in live if buffers[i][0].last >= step}
        counted = _counted(buffers[i][1] for i in live)
        held = [buf for buf, _ in counted]
        for buf, size in counted:
            series[buf.kind][step] += size
        top[step] = max((b.address + b.size for b in held), default=0)
        series[FREE][step] = max(top[step] - sum(size for _, size in counted), 0)
        if top[step] > (top[peak[0]] if peak[0] >= 0 else -1):
            peak = (step, tuple(sorted(held, key=lambda b: b.address)))
    return Timeline(
        pool=schedule.memory.sram_bytes,
        bytes_by_kind=series,
        top=top,
        cascades=_cascades(steps),
        step_labels=tuple(_step_label(step, layer) for step in steps),
        peak_step=max(peak[0], 0),
        peak_buffers=peak[1],
    )


def _counted(held) -> list[tuple[LiveBuffer, int]]:
    """Each live buffer with the bytes it adds to those of the buffers before it: an output
    written over its input shares the input's bytes, one laid over its input some of them;
    the kind listed first in KINDS (then the larger buffer) counts shared bytes. Buffers
    adding none are left out."""
    found: list[tuple[LiveBuffer, int]] = []
    taken: list[tuple[int, int]] = []  # disjoint address ranges counted already
    for buf in sorted(held, key=lambda b: (KINDS.index(b.kind), -b.size, b.address, b.name)):
        lo, hi = buf.address, buf.address + buf.size
        shared = sum(max(min(hi, end) - max(lo, start), 0) for start, end in taken)
        if buf.size - shared > 0:
            found.append((buf, buf.size - shared))
        merged = [(start, end) for start, end in taken if end < lo or hi < start]
        touching = [(start, end) for start, end in taken if not (end < lo or hi < start)]
        merged.append((min([lo, *(a for a, _ in touching)]), max([hi, *(b for _, b in touching)])))
        taken = merged
    return found


def _sram_buffers(schedule: Schedule, layer: Callable[[int], str]) -> dict[int, tuple]:
    """Buffer index -> (buffer, LiveBuffer) for every buffer in SRAM."""
    net = schedule.network
    graph = net.graph
    io = {net.buffer_root(t.id) for t in (*graph.input_tensors, *graph.output_tensors)}
    copied_into = {s.dest: s for s in schedule.steps if isinstance(s, Copy)}
    found = {}
    for buf in schedule.buffers:
        if buf.area != "sram" or buf.size <= 0:
            continue
        copy = copied_into.get(buf.index)
        if graph.tensors[buf.tensor].is_constant:
            what = copy.what.replace("_", "-") if copy is not None else "constants"
            name = f"{what} of {layer(copy.part)}" if copy is not None else what
            kind = "copied weights and biases"
        else:
            name = net.feature_map(buf.tensor).name
            kind = _feature_map_kind(buf.kind, buf.tensor in io, copy is not None)
        found[buf.index] = (buf, LiveBuffer(name, kind, buf.size, buf.address))
    return found


def _feature_map_kind(kind: str, is_io: bool, copied: bool) -> str:
    if is_io:
        return "model I/O"
    if kind == "tensor":
        return "feature maps between cascades"
    if kind == "rolling":
        return "rolling buffers"
    return "feature-map copies" if copied else "cascade intermediates"


def _plans(steps) -> list[int]:
    """The plan each step belongs to: a stripe's own; a copy's, the next stripe's."""
    plans = [-1] * len(steps)
    following = -1
    for index in range(len(steps) - 1, -1, -1):
        if isinstance(steps[index], Stripe):
            following = steps[index].plan
        plans[index] = following
    last = -1
    for index, plan in enumerate(plans):  # copies after the last stripe: its plan
        plans[index] = last = plan if plan >= 0 else last
    return plans


def _cascades(steps) -> tuple[CascadeSpan, ...]:
    plans = _plans(steps)
    parts: dict[int, set[int]] = {}
    for step in steps:
        if isinstance(step, Stripe):
            parts.setdefault(step.plan, set()).add(step.part)
    spans: list[CascadeSpan] = []
    for index, plan in enumerate(plans):
        if spans and spans[-1].plan == plan and spans[-1].last == index - 1:
            spans[-1] = CascadeSpan(plan, spans[-1].first, index, spans[-1].layers)
        else:
            spans.append(CascadeSpan(plan, index, index, len(parts.get(plan, ()))))
    return tuple(spans)


def _step_label(step, layer: Callable[[int], str]) -> str:
    if isinstance(step, Stripe):
        return f"stripe of {layer(step.part)}"
    return f"copy of {step.what.replace('_', '-')} for {layer(step.part)}"
