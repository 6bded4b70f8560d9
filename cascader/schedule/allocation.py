"""Addresses for a schedule's buffers: buffers written over the input they replace, then per
memory area first-fit in a few orders and Vela's hill-climb allocator when none reaches the
live peak; the smallest extent wins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ethosu.vela.hillclimb_allocation import allocate_live_ranges
from ethosu.vela.live_range import LiveRange

from cascader.core.part import in_place_input
from cascader.ir.schedule import Buffer, Step, Stripe
from cascader.ir.units import ALIGN, align

HILL_CLIMB_ITERATIONS = 1000


def written_over(
    buffers: Sequence[Buffer],
    steps: Sequence[Step],
    parts: Sequence,
    shared: set[int],
    graph_io: set[int],
) -> dict[int, int]:
    """Output buffer -> the input buffer it is written over: an elementwise op's whole
    output over a whole input of the same bytes and layout in the same area that only
    this op reads (`core.part.in_place_input`) and that is complete before the op's
    first stripe, as Vela's allocator places them. Each stripe reads its input box
    before writing the same box of the output, and nothing writes the input after.
    `parts`: the cascader graph's parts; `shared`: tensors whose buffer others write too;
    `graph_io`: the graph's inputs and outputs (the host reads and writes those)."""
    over: dict[int, int] = {}
    last_write: dict[int, int] = {}
    for index, step in enumerate(steps):
        last_write[step.ofm_buffer if isinstance(step, Stripe) else step.dest] = index
    seen: set[int] = set()  # outputs decided at their first stripe
    for index, step in enumerate(steps):
        if not isinstance(step, Stripe) or step.ofm_buffer in seen:
            continue
        seen.add(step.ofm_buffer)
        part = parts[step.part]
        slot = in_place_input(part)
        if slot < 0:
            continue
        out, source = buffers[step.ofm_buffer], buffers[step.ifms[slot][1]]
        if (
            out.kind == source.kind == "tensor"
            and source.tensor == part.inputs[slot].id  # its own buffer, not an alias's
            and out.tensor == part.output.id
            and out.tensor not in shared
            and source.tensor not in graph_io
            and (out.area, out.size, out.layout) == (source.area, source.size, source.layout)
            and last_write.get(source.index, -1) < index
        ):
            over[out.index] = source.index
    return over


def allocate(buffers: list[Buffer], over: dict[int, int]) -> dict[str, int]:
    """Addresses per area, each buffer at the lowest aligned address that overlaps no
    buffer live at the same time: first-fit in a few orders (largest first, longest-lived
    first, first-used first) and, when none reaches the live peak, Vela's hill-climb
    allocator from there; the smallest extent wins. A buffer in `over` (`written_over`) is
    placed with the one it is written over. Sets every buffer's address; returns each
    area's extent."""
    extents: dict[str, int] = {}
    members: dict[int, list[Buffer]] = {}
    for buf in buffers:
        base = buf.index
        while base in over:
            base = over[base]
        members.setdefault(base, []).append(buf)
    by_area: dict[str, list[Buffer]] = {}
    for base, group in members.items():
        # A buffer written over another is placed with it, as one live range.
        first, last = min(b.first for b in group), max(b.last for b in group)
        joined = replace(buffers[base], first=first, last=last)
        by_area.setdefault(joined.area, []).append(joined)
    orders = (
        lambda b: (-b.size, b.first, b.index),
        lambda b: (-(b.last - b.first + 1) * b.size, b.index),
        lambda b: (b.first, -b.size, b.index),
    )
    for area, joined_buffers in by_area.items():
        ranges = sorted(joined_buffers, key=lambda b: b.index)
        candidates = []
        for order in orders:
            placed = dict((b.index, a) for b, a in _first_fit(sorted(ranges, key=order)))
            candidates.append([placed[b.index] for b in ranges])
        if _extent(ranges, min(candidates, key=lambda c: _extent(ranges, c))) > _peak(ranges):
            candidates.append(_hill_climb(ranges, _peak(ranges)))
        best = min(candidates, key=lambda c: _extent(ranges, c))
        for joined, address in zip(ranges, best, strict=True):
            for buf in members[joined.index]:
                buf.address = address
        extents[area] = _extent(ranges, best)
    return extents


def _extent(buffers: list[Buffer], addresses: list[int]) -> int:
    return max((a + b.size for b, a in zip(buffers, addresses, strict=True)), default=0)


def _peak(buffers: list[Buffer]) -> int:
    """The most bytes live at once: no allocation can be smaller."""
    events: dict[int, int] = {}
    for b in buffers:
        events[b.first] = events.get(b.first, 0) + b.size
        events[b.last + 1] = events.get(b.last + 1, 0) - b.size
    live = peak = 0
    for step in sorted(events):
        live += events[step]
        peak = max(peak, live)
    return peak


def _hill_climb(buffers: list[Buffer], target: int) -> list[int]:
    """Vela's search-based allocator, stopping at `target` bytes (deterministic: it seeds
    its own generator)."""
    ranges = []
    for buf in buffers:
        lr = LiveRange(None, ALIGN)
        lr.start_time, lr.end_time, lr.size = buf.first, buf.last, buf.size
        ranges.append(lr)
    return [int(a) for a in allocate_live_ranges(ranges, HILL_CLIMB_ITERATIONS, target)]


def _first_fit(buffers: list[Buffer]) -> list[tuple[Buffer, int]]:
    """Each buffer in turn at the lowest aligned address free throughout its lifetime."""
    placed: list[tuple[Buffer, int]] = []
    for buf in buffers:
        busy = sorted(
            (address, address + other.size)
            for other, address in placed
            if other.first <= buf.last and buf.first <= other.last
        )
        address = 0
        for lo, hi in busy:
            if address + buf.size <= lo:
                break
            address = max(address, align(hi))
        placed.append((buf, address))
    return placed
