"""Weights prebuffered under the plan before: each plan's first weight and scale-bias copies
moved up to run while the previous plan computes.

The evaluator (as Vela's estimate) hides an op's first weight copy under the op before it.
The stream allows that only when the copy is issued while that op runs and writes memory it
does not touch: so the copy moves to just after the previous plan's last DMA has been
followed by one of its stripes (its DMAs keep their order on the one DMA engine), and its
buffer is live from that stripe on, which keeps the allocator from placing it over anything
the previous plan still uses (consecutive ops' weights get different addresses: ping-pong).
That can take more SRAM, so a schedule keeps a fallback for pools it does not fit
(`policies`): only the moves that leave the live peak as it was, or none; a first copy left
in place hides nothing in the evaluator (`codegen` reads which copies run beside an earlier
stripe from their buffers' lives)."""

from __future__ import annotations

from dataclasses import dataclass

from cascader.ir.schedule import Buffer, Copy, Step, Stripe

__all__ = ["prebuffer"]


@dataclass(frozen=True)
class _Move:
    """A plan's leading constant copies (`copies`, step indices) and where they would go:
    after the previous plan's stripe `under`, their buffers live from it to the plan's
    first step `start`."""

    under: int
    start: int
    copies: tuple[int, ...]


def _candidates(steps: list[Step], function_of: tuple[int, ...]) -> list[_Move]:
    """Per plan boundary within an NPU function, in order, the move of the later plan's
    constant copies before its first stripe under the first stripe that follows the previous
    plan's last copy."""
    moves = []
    previous: tuple[int, int] | None = None  # (first step, end) of the plan before
    index = 0
    while index < len(steps):
        first_stripe = index
        while first_stripe < len(steps) and not isinstance(steps[first_stripe], Stripe):
            first_stripe += 1
        if first_stripe == len(steps):
            break
        plan = steps[first_stripe].plan
        end = first_stripe
        while end < len(steps) and (not isinstance(steps[end], Stripe) or steps[end].plan == plan):
            end += 1
        while end > first_stripe and isinstance(steps[end - 1], Copy):
            end -= 1  # a copy after the plan's last stripe belongs to the next plan
        leading = tuple(
            i
            for i in range(index, first_stripe)
            if isinstance(steps[i], Copy) and steps[i].what != "feature_map"
        )
        if previous is not None and leading:
            start, stop = previous
            if function_of[steps[start].part] == function_of[steps[first_stripe].part]:
                copies = [i for i in range(start, stop) if isinstance(steps[i], Copy)]
                under = copies[-1] + 1 if copies else start
                while under < stop and not isinstance(steps[under], Stripe):
                    under += 1
                if under < stop:
                    moves.append(_Move(under, index, leading))
        previous = (index, end)
        index = end
    return moves


def _live_bytes(steps: list[Step], buffers: list[Buffer], area: str) -> list[int]:
    """Per step, the bytes of `area`'s buffers live at it."""
    live = [0] * (len(steps) + 1)
    for buf in buffers:
        if buf.area == area and buf.first < len(steps):
            live[buf.first] += buf.size
            live[min(buf.last, len(steps) - 1) + 1] -= buf.size
    total = 0
    for i in range(len(steps)):
        total += live[i]
        live[i] = total
    return live[:-1]


def _within_peak(moves: list[_Move], steps: list[Step], buffers: list[Buffer]) -> list[_Move]:
    """The moves whose buffers, live earlier, leave the most bytes live at once as they were
    (each taken in order, counting the ones taken before)."""
    if not moves:
        return []
    area = buffers[steps[moves[0].copies[0]].dest].area
    live = _live_bytes(steps, buffers, area)
    peak = max(live, default=0)
    taken = []
    for move in moves:
        dests = {steps[i].dest for i in move.copies}
        added = sum(buffers[d].size for d in dests if buffers[d].area == area)
        span = range(move.under, move.start)
        if max((live[i] for i in span), default=0) + added <= peak:
            for i in span:
                live[i] += added
            taken.append(move)
    return taken


def prebuffer(
    steps: list[Step], buffers: list[Buffer], function_of: tuple[int, ...], within_peak: bool
) -> bool:
    """Move each plan's first weight and scale-bias copies under the plan before (see the
    module's docstring), in place: every buffer's live range follows its steps, and a moved
    copy's buffer is live from the stripe it runs beside. With `within_peak`, only the moves
    that keep the most bytes live at once (what no allocation can go below) as they were.
    Whether anything moved."""
    moves = _candidates(steps, function_of)
    if within_peak:
        moves = _within_peak(moves, steps, buffers)
    if not moves:
        return False
    moved = {i for move in moves for i in move.copies}
    inserted = {move.under + 1: move.copies for move in moves}
    order: list[int] = []
    for i in range(len(steps)):
        order.extend(inserted.get(i, ()))
        if i not in moved:
            order.append(i)
    count = len(steps)
    new_index = [0] * count
    for new, old in enumerate(order):
        new_index[old] = new
    # A range runs from its first kept (unmoved) step to its last, wherever those went.
    next_kept, prev_kept = [count] * (count + 1), [-1] * count
    for i in reversed(range(count)):
        next_kept[i] = next_kept[i + 1] if i in moved else i
    for i in range(count):
        prev_kept[i] = (prev_kept[i - 1] if i else -1) if i in moved else i
    for buf in buffers:
        lo, hi = min(buf.first, count), min(buf.last, count - 1)
        if next_kept[lo] <= hi:
            buf.first, buf.last = new_index[next_kept[lo]], new_index[prev_kept[hi]]
    for move in moves:
        under = new_index[move.under]
        for old in move.copies:
            dest = buffers[steps[old].dest]
            dest.first = min(dest.first, under)
    steps[:] = [steps[i] for i in order]
    return True
