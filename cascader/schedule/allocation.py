"""Addresses for a schedule's buffers: buffers written over the input they replace, then per
memory area first-fit in a few orders and Vela's hill-climb allocator when none reaches the
live peak; the smallest extent wins."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import replace

from ethosu.vela.hillclimb_allocation import allocate_live_ranges
from ethosu.vela.live_range import LiveRange

from cascader.core.overlay import overlaid_input
from cascader.core.part import in_place_input
from cascader.ir.boxes import Box
from cascader.ir.schedule import Buffer, Copy, Step, Stripe
from cascader.ir.units import ALIGN, align

HILL_CLIMB_ITERATIONS = 1000
BREAKING = ("latest", "least", "tight")  # the ways `_units` breaks chains, each tried


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


def overlays(
    buffers: Sequence[Buffer],
    steps: Sequence[Step],
    parts: Sequence,
    shared: set[int],
    taken: dict[int, int],
) -> dict[int, tuple[int, int]]:
    """Output buffer -> (the input buffer it is laid over, how far above the output's start
    that input sits; negative: below): a plan's whole output written in row stripes over the
    whole input a part of the plan reads in row order (`core.overlay.overlaid_input`, as the
    cascader counts it), each stripe's rows landing only on rows that no later operation
    reads (nor the operation itself), as an MCU planner lays a layer's output over its
    consumed input. Stripes running down the rows put the output below its input, stripes
    running up (a plan laid upward, `Plan.upward`) above it, each the least distance that
    keeps every write clear of the rows still to be read; kept where that saves bytes. Both
    are kernel-only (a DMA runs beside the kernels, so a buffer a `Copy` reads or writes is
    never laid over) and written stripe by stripe (not a pad's output, filled whole first),
    neither is another's alias, the input is complete before the output's first write and
    dead after its last read (the host reads no graph input later). Conservative across the
    width and depth: a stripe writes or reads its rows' whole bytes. An output laid over an
    input may have another output laid over it in turn. `parts`: the cascader graph's;
    `taken`: the pairs `written_over` made, left alone."""
    reads: dict[int, list[tuple[int, int, int]]] = {}  # buffer -> (step, first, end byte read)
    writes: dict[int, list[tuple[int, int, int]]] = {}  # buffer -> (step, first, end written)
    apart: set[int] = set()  # buffers a DMA touches, or written whole before their stripes
    used: dict[int, int] = {}  # buffer -> the last step naming it as an input
    plan_parts: dict[int, set[int]] = {}
    whole_tensor = [buf.kind == "tensor" for buf in buffers]  # only these are laid or laid over
    for index, step in enumerate(steps):
        if isinstance(step, Copy):
            apart.update((step.source, step.dest))
            continue
        for box, buf, _ in step.ifms:
            used[buf] = index
            if whole_tensor[buf] and not box.empty:  # a stripe of padding alone reads nothing
                reads.setdefault(buf, []).append((index, *_row_bytes(buffers[buf], box)))
        out = step.ofm_buffer
        if whole_tensor[out]:
            writes.setdefault(out, []).append((index, *_row_bytes(buffers[out], step.ofm)))
        if not parts[step.part].rows_outermost:
            apart.add(out)  # a pad's fill
        plan_parts.setdefault(step.plan, set()).add(step.part)
    whole = {buf.tensor: buf.index for buf in buffers if buf.kind == "tensor"}
    plan_of = {step.ofm_buffer: step.plan for step in steps if isinstance(step, Stripe)}
    paired = {*taken, *taken.values()}
    laid_out: set[int] = set()  # outputs laid already
    laid_under: set[int] = set()  # inputs an output is laid over already

    def eligible(buf: Buffer) -> bool:
        return (
            buf.kind == "tensor"
            and buf.index not in apart
            and buf.index not in paired
            and buf.tensor not in shared
        )

    # Per buffer read: its reads' steps and, per read, the least first byte and the most end
    # byte read from there on.
    pending: dict[int, tuple[list[int], list[int], list[int]]] = {}
    for buf, found_reads in reads.items():
        least, most, low, high = [], [], 1 << 62, 0
        for _, first, end in reversed(found_reads):
            low, high = min(low, first), max(high, end)
            least.append(low)
            most.append(high)
        pending[buf] = ([j for j, _, _ in found_reads], least[::-1], most[::-1])
    found: dict[int, tuple[int, int]] = {}
    for out in sorted(writes, key=lambda b: writes[b][0][0]):
        target = buffers[out]
        if not eligible(target) or out in laid_out:
            continue
        written = writes[out]
        start, stop = written[0][0], written[-1][0]
        best: tuple[int, int, int] | None = None  # (saving, -source, offset)
        sources = {
            whole.get(parts[pid].inputs[slot].id, -1)
            for pid in plan_parts[plan_of[out]]
            if (slot := overlaid_input(parts[pid])) >= 0
        }
        for source in sorted(sources & pending.keys()):
            read_steps, least, most = pending[source]
            below = buffers[source]
            if (
                source == out
                or read_steps[-1] < start
                or read_steps[0] > stop
                or below.last > used[source]
                or source in laid_under
                or not eligible(below)
                or below.area != target.area
                or max((j for j, _, _ in writes.get(source, ())), default=-1) >= start
            ):
                continue
            down = up = 0
            for k, first, end in written:
                at = bisect_left(read_steps, k)
                if at < len(read_steps):
                    down = max(down, end - least[at])
                    up = max(up, most[at] - first)
            down, up = align(down), align(up)
            for saving, offset in (
                (below.size + target.size - max(target.size, down + below.size), down),
                (below.size + target.size - max(below.size, up + target.size), -up),
            ):
                if saving > 0 and (best is None or (saving, -source) > best[:2]):
                    best = (saving, -source, offset)
        if best is not None:
            found[out] = (-best[1], best[2])
            laid_out.add(out)
            laid_under.add(-best[1])
    return found


def _row_bytes(buf: Buffer, box: Box) -> tuple[int, int]:
    """The bytes of the whole rows a box covers in a whole-tensor buffer (a row is the
    outermost stored axis after the batch in both layouts)."""
    height = buf.frame[1] if len(buf.frame) == 4 else 1
    row = buf.size // max(height, 1)
    if len(buf.frame) != 4 or len(box.start) != 4:
        return 0, buf.size
    first = min(max(box.start[1], 0), height)
    end = min(max(box.end[1], first), height)
    return first * row, end * row


def allocate(
    buffers: list[Buffer], over: dict[int, int], laid: dict[int, tuple[int, int]] | None = None
) -> dict[str, int]:
    """Addresses per area, each buffer at the lowest aligned address that overlaps no
    buffer live at the same time: first-fit in a few orders (largest first, longest-lived
    first, first-used first) and, when none reaches the live peak, Vela's hill-climb
    allocator from there; the smallest extent wins. A buffer in `over` (`written_over`) is
    placed with the one it is written over, as one live range. With `laid` (`overlays`),
    the first-fits are tried again, and latest-ending first, with each chain of laid
    buffers placed as one unit at their offsets (`_units`, chains broken three ways). Sets
    every buffer's address; returns each area's extent."""
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
        lambda u: (-_span(u), u[0][0].first, u[0][0].index),
        lambda u: (-sum((b.last - b.first + 1) * b.size for b, _ in u), u[0][0].index),
        lambda u: (u[0][0].first, -_span(u), u[0][0].index),
    )
    # A laid output sits below its input: placing later units first leaves it the room.
    laid_order = (lambda u: (-max(b.last for b, _ in u), -_span(u), u[0][0].index),)
    extents: dict[str, int] = {}
    for area, joined_buffers in by_area.items():
        ranges = sorted(joined_buffers, key=lambda b: b.index)
        peak = _peak(ranges)
        alone = [[(b, 0)] for b in ranges]
        chained = [_units(ranges, laid, peak, way) for way in BREAKING] if laid else []
        candidates = []
        for units, tried in [(alone, orders)] + [
            (units, orders + laid_order) for units in chained if len(units) < len(alone)
        ]:
            for order in tried:
                placed = _first_fit(sorted(units, key=order))
                candidates.append([placed[b.index] for b in ranges])
        if _extent(ranges, min(candidates, key=lambda c: _extent(ranges, c))) > peak:
            candidates.append(_hill_climb(ranges, peak))
        best = min(candidates, key=lambda c: _extent(ranges, c))
        for joined, address in zip(ranges, best, strict=True):
            for buf in members[joined.index]:
                buf.address = address
        extents[area] = _extent(ranges, best)
    return extents


def _units(
    ranges: list[Buffer], laid: dict[int, tuple[int, int]], limit: int, breaking: str
) -> list[list[tuple[Buffer, int]]]:
    """The buffers as units of (buffer, address above the unit's start): each chain of laid
    buffers (an input, the output laid over it, the output laid over that, ...) one unit
    at their offsets. An output running down its rows starts below its input, so a chain
    of them drifts down; one running up turns it back (`overlays`). A chain
    is broken where a unit would span more than `limit` bytes ("latest", "least") or more
    than its widest pair ("tight"), or where two of its buffers not laid over each other
    would share bytes while both live: before the buffer that overflows ("latest"), or at
    the pair of the fewest bytes live beside it while it overlaps, where keeping the two
    apart costs least ("least", "tight")."""
    by_index = {b.index: b for b in ranges}
    source_of = {
        out: (source, offset)
        for out, (source, offset) in laid.items()
        if out in by_index and source in by_index
    }
    out_of = {source: out for out, (source, _) in source_of.items()}
    live = _live_bytes(ranges)
    units: list[list[tuple[Buffer, int]]] = []
    for head in ranges:
        if head.index in source_of:
            continue  # not a chain's first buffer
        chain, shifts = [head], [0]
        while chain[-1].index in out_of:
            nxt = by_index[out_of[chain[-1].index]]
            chain.append(nxt)
            shifts.append(shifts[-1] - source_of[nxt.index][1])
        # A pair's own span: the output and the input at its offset above (or below).
        pairs = [0] + [
            _pair_span(chain[j].size, chain[j - 1].size, source_of[chain[j].index][1])
            for j in range(1, len(chain))
        ]
        first, i = 0, 1
        while i < len(chain):
            widest = min(limit, max(pairs[first + 1 : i + 1])) if breaking == "tight" else limit
            if _fits(chain[first : i + 1], shifts[first : i + 1], widest):
                i += 1
                continue
            # Break before the buffer that overflows, or where keeping the pair apart costs least.
            cut = (
                i
                if breaking == "latest"
                else min(range(first + 1, i + 1), key=lambda j: (_beside(live, chain, j), -j))
            )
            units.append(_unit(chain[first:cut], shifts[first:cut]))
            first = cut
            i = max(i, first + 1)
        units.append(_unit(chain[first:], shifts[first:]))
    return units


def _pair_span(output: int, input: int, offset: int) -> int:
    """The bytes an output and the input it is laid over span, the input `offset` bytes
    above the output's start (negative: below)."""
    return max(output, offset + input) - min(0, offset)


def _unit(chain: list[Buffer], shifts: list[int]) -> list[tuple[Buffer, int]]:
    low = min(shifts)
    return [(b, s - low) for b, s in zip(chain, shifts, strict=True)]


def _beside(live: list[int], chain: list[Buffer], j: int) -> int:
    """The most bytes live while buffer j of a chain and the one it is laid over both are."""
    return max(live[chain[j].first : chain[j - 1].last + 1], default=0)


def _fits(chain: list[Buffer], shifts: list[int], limit: int) -> bool:
    """Whether a stretch of a chain at its shifts spans at most `limit` bytes and shares
    no bytes but between neighbours (a buffer and the one laid over it)."""
    low = min(shifts)
    high = max(s + b.size for b, s in zip(chain, shifts, strict=True))
    if high - low > limit:
        return False
    return not any(
        a.first <= b.last and b.first <= a.last and sa < sb + b.size and sb < sa + a.size
        for i, (a, sa) in enumerate(zip(chain, shifts, strict=True))
        for b, sb in zip(chain[i + 2 :], shifts[i + 2 :], strict=True)
    )


def _live_bytes(buffers: list[Buffer]) -> list[int]:
    """Per step, the bytes of the buffers live then."""
    end = max((b.last for b in buffers), default=-1) + 2
    delta = [0] * end
    for b in buffers:
        delta[b.first] += b.size
        delta[b.last + 1] -= b.size
    live, total = [], 0
    for change in delta[:-1]:
        total += change
        live.append(total)
    return live


def _span(unit: list[tuple[Buffer, int]]) -> int:
    return max(s + b.size for b, s in unit)


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


def _first_fit(units: list[list[tuple[Buffer, int]]]) -> dict[int, int]:
    """Each unit (`_units`) in turn at the lowest aligned address where each of its buffers
    is free throughout its lifetime; every buffer's address, by index."""
    placed: list[tuple[Buffer, int]] = []
    where: dict[int, int] = {}
    for unit in units:
        # Unit starts in (lo, hi) put one of its buffers over one placed and live with it.
        blocked = [
            (address - shift - buf.size, address + other.size - shift)
            for buf, shift in unit
            for other, address in placed
            if other.first <= buf.last and buf.first <= other.last
        ]
        start = 0
        for lo, hi in sorted(blocked):
            if start <= lo:
                break
            start = max(start, align(hi))
        for buf, shift in unit:
            placed.append((buf, start + shift))
            where[buf.index] = start + shift
    return where
