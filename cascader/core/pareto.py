"""Pareto culling on (memory, cycles) with the original's thinning to a maximum count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from cascader.core.floats import f32

T = TypeVar("T")


def thin_indices(size: int, max_size: int) -> list[int]:
    """Indices of an evenly spaced sample of `max_size` items from `size`, always keeping the
    first and the last. The step accumulates in single precision, as in the original."""
    if max_size < 1:
        return []
    if size <= max_size:
        return list(range(size))
    if max_size == 1:
        return [0]
    step = f32(size / (max_size - 1))
    limit = f32(size - 1)
    picked, position = [], 0.0
    while position < limit:
        picked.append(int(position))
        position = f32(position + step)
    picked.append(size - 1)
    return picked


def pareto_order(memory: Sequence[int], cycles: Sequence[int]) -> list[int]:
    """Indices of the Pareto-optimal points in ascending (memory, cycles) order. Ties in both
    keep the earliest point. Costs compare in single precision, as the original's did."""
    n = len(memory)
    if n == 0:
        return []
    mem = np.asarray(memory, dtype=np.int64)
    cyc = np.asarray(cycles, dtype=np.int64)
    by_cost = np.lexsort((cyc, mem))
    fmem = mem[by_cost].astype(np.float32)
    fcyc = cyc[by_cost].astype(np.float32)
    by_float = np.lexsort((fcyc, fmem))
    ordered = fcyc[by_float]
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], ordered[:-1])))
    keep = np.zeros(n, dtype=bool)
    keep[by_float[ordered < best_before]] = True
    return by_cost[keep].tolist()


def pareto_cull(
    items: list[T],
    memory: Sequence[int],
    cycles: Sequence[int],
    max_size: int,
    disable_pareto: bool,
) -> list[T]:
    """The Pareto-optimal items in ascending (memory, cycles) order, thinned to `max_size`;
    with `disable_pareto` a plain thinning of `items` as given."""
    if disable_pareto:
        return [items[i] for i in thin_indices(len(items), max_size)]
    optimal = pareto_order(memory, cycles)
    return [items[optimal[i]] for i in thin_indices(len(optimal), max_size)]


def cull_plans(entries: list[tuple], max_plans: int, disable_pareto: bool) -> list[tuple]:
    """Plan candidates `(memory, cycles, ...)` culled as the original culled plans: a group no
    larger than `max_plans` is kept whole (dominated ones included), a larger one is reduced
    to its thinned Pareto front."""
    if len(entries) <= max_plans:
        return entries
    return pareto_cull(
        entries, [e[0] for e in entries], [e[1] for e in entries], max_plans, disable_pareto
    )
