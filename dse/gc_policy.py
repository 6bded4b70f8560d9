"""When a sweep or worker process runs Python's cyclic garbage collector: every few hundred
evaluations, between them, instead of whenever allocations pile up.

A process holds a large long-lived heap (TVM's and Vela's modules, the model, cached proposals
and schedules) and each evaluation allocates hundreds of thousands of objects that mostly stay
(cache entries) or die by reference counting. Only about a thousand per evaluation die in
cycles, most of them one-off set-up (SQLAlchemy's table metadata) and Vela's live-range
allocator. Left to its own policy the collector rescans the whole heap every few trials, mid
trial (0.2-0.5 s each); scanning what 32 MobileNetV2 evaluations made takes 0.75 s. Here the
heap at entry is frozen (`gc.freeze`) and the collector runs every COLLECT_EVERY evaluations
over everything made since: the cyclic garbage of that many evaluations is a few tens of MB."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

COLLECT_EVERY = 256
_evaluations: list[int] = []  # evaluations so far in the open `collected_between_evaluations`


@contextlib.contextmanager
def collected_between_evaluations() -> Iterator[None]:
    """Turn the collector's own policy off for the block (`after_evaluation` collects). The
    heap existing at entry is frozen; at exit it and what the block made are unfrozen into
    the oldest generation. An inner block is a no-op."""
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
        # What the block made joins the old generation, with the heap frozen at entry
        # (unfreeze puts the frozen objects there), instead of waiting in the youngest one:
        # the collector was off, so that is all of it, and the first young collection after
        # the block would scan it all (1.4 s after a 100-trial MobileNetV2 sweep) to free
        # next to nothing. Its cyclic garbage goes at the next full collection.
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def after_evaluation() -> None:
    """Count an evaluation and collect when it is due; nothing outside a
    `collected_between_evaluations` block (the collector's own policy runs there)."""
    if not _evaluations:
        return
    _evaluations[0] += 1
    if _evaluations[0] % COLLECT_EVERY == 0:
        gc.collect()


def before_exit() -> None:
    """The last thing a dse process does (the `dse` script, a `--jobs` worker): close the
    storages it opened, then freeze the heap, so the interpreter's collection at exit does
    not scan it (3-4 s after a MobileNetV2 sweep). Closing comes first because a SQLite
    connection left to exit keeps the latest commits in the write-ahead log beside the
    study file, not in it (`dse.study.close_storages`)."""
    study = sys.modules.get("dse.study")  # imported only by processes that opened a storage
    if study is not None:
        study.close_storages()
    gc.freeze()
