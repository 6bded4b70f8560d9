"""Pausing Python's cyclic garbage collector around bursts of allocation."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Plan generation and scoring allocate hundreds of thousands of small objects that stay
    alive until the end (tuples, plans, stripes, Vela operations), so the cyclic collector
    would rescan a growing heap, and the process's long-lived one (the model's IR, cached
    proposals and schedules), again and again for nothing: a third of a cascader run.
    Reference counting still frees garbage meanwhile. Nests: only the outermost pause turns
    the collector back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
