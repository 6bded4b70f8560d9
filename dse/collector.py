"""When a sweep or worker process runs Python's cyclic garbage collector: every few
evaluations, between them, over what they made, instead of whenever allocations pile up.

A process holds a large long-lived heap (TVM's and Vela's modules, the model, cached proposals
and schedules) and each evaluation allocates hundreds of thousands of objects that mostly stay
(cache entries) or die by reference counting; only a few thousand die in cycles. Left to its own
policy the collector rescans the whole heap every few trials, mid trial (0.2-0.5 s each). Here
it runs every COLLECT_EVERY evaluations over the objects made since the last run, then freezes
the survivors (`gc.freeze`), so each object is scanned about once. Every FULL_EVERY evaluations
it scans everything, for long-lived objects that died in cycles since (evicted cache entries)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

COLLECT_EVERY = 32
FULL_EVERY = 256
_evaluations: list[int] = []  # evaluations so far in the open `collected_between_evaluations`


@contextlib.contextmanager
def collected_between_evaluations() -> Iterator[None]:
    """Turn the collector's own policy off for the block (`after_evaluation` collects). The
    heap existing at entry is frozen; everything is unfrozen at exit. An inner block is a
    no-op."""
    if _evaluations:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    _evaluations.append(0)
    try:
        yield
    finally:
        _evaluations.clear()
        gc.unfreeze()
        if enabled:
            gc.enable()


def after_evaluation() -> None:
    """Count an evaluation and collect when it is due; nothing outside a
    `collected_between_evaluations` block (the collector's own policy runs there)."""
    if not _evaluations:
        return
    _evaluations[0] += 1
    done = _evaluations[0]
    if done % COLLECT_EVERY:
        return
    if done % FULL_EVERY == 0:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
