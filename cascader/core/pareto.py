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


def _thin_mask(sizes: np.ndarray, ranks: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """For entries at `ranks` within groups of `sizes`: whether `thin_indices(size, limit)`
    picks them. One pick table per distinct (size, limit), since groups repeat a few.
    Limits are below the sizes they thin (else there is nothing to thin), so they fit
    beside them in one integer; a negative one thins to nothing, like zero."""
    limits = np.clip(limits, 0, sizes)
    distinct, which = np.unique((sizes << 32) | limits, return_inverse=True)
    tables = []
    for key in distinct.tolist():
        table = np.zeros(key >> 32, dtype=bool)
        table[thin_indices(key >> 32, key & 0xFFFFFFFF)] = True
        tables.append(table)
    offsets = np.cumsum([0] + [len(t) for t in tables[:-1]])
    return np.concatenate(tables)[offsets[which] + ranks]


def _ranks(groups: np.ndarray) -> np.ndarray:
    """Position of each entry within its run of equal `groups` (which must be sorted)."""
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    lengths = np.diff(np.append(starts, len(groups)))
    return np.arange(len(groups)) - np.repeat(starts, lengths)


def _fronts(chosen: np.ndarray, groups: np.ndarray, memory: np.ndarray, cycles: np.ndarray):
    """`pareto_order` of each group of the entries `chosen` (ascending indices), group by
    group. Sorted by (group, single-precision memory) as one integer key, each run of equal
    memory can only keep its fewest-cycles entry (the first by exact memory, cycles, index
    among equals), and keeps it when it beats every earlier run of its group."""
    in_group = groups[chosen]
    fmem = memory[chosen].astype(np.float32)
    # Non-negative float32 values order like their bit patterns.
    key = (in_group << 31) | fmem.view(np.int32).astype(np.int64)
    order = np.argsort(key)
    chosen, key, in_group = chosen[order], key[order], in_group[order]
    fcyc = cycles[chosen].astype(np.float32)
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    run_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(key))))
    least = np.minimum.reduceat(fcyc, starts)
    # Running minimum within each group: the negated group id above the cycles' bits.
    keyed = (-in_group[starts] << 32) | least.view(np.int32).astype(np.int64)
    before = np.minimum.accumulate(np.concatenate(([np.iinfo(np.int64).max], keyed[:-1])))
    candidate = (keyed < before)[run_of] & (fcyc == least[run_of])
    chosen, run_of = chosen[candidate], run_of[candidate]
    order = np.lexsort((chosen, cycles[chosen], memory[chosen], run_of))
    chosen, run_of = chosen[order], run_of[order]
    return chosen[np.concatenate(([True], run_of[1:] != run_of[:-1]))]


def cull_groups(
    groups: np.ndarray,
    memory: np.ndarray,
    cycles: np.ndarray,
    limits: np.ndarray,
    disable_pareto: bool,
) -> np.ndarray:
    """`cull_plans` on many groups of candidates at once. Entry i is in group `groups[i]`
    with costs (memory[i], cycles[i]); entries are in candidate order (it breaks exact
    ties); group g keeps at most `limits[g]`. Returns the kept entries' indices, group by
    group in ascending group id, each group's in the order `cull_plans` returns them."""
    count = len(limits)
    sizes = np.bincount(groups, minlength=count)
    culled = (sizes > limits)[groups]
    whole = np.flatnonzero(~culled)
    whole = whole[np.argsort(groups[whole], kind="stable")]
    chosen = np.flatnonzero(culled)
    if len(chosen) == 0:
        return whole
    if disable_pareto:
        chosen = chosen[np.argsort(groups[chosen], kind="stable")]
    else:
        chosen = _fronts(chosen, groups, memory, cycles)
    in_group = groups[chosen]
    fronts = np.bincount(in_group, minlength=count)[in_group]
    chosen = chosen[_thin_mask(fronts, _ranks(in_group), limits[in_group])]
    kept = np.concatenate((whole, chosen))
    return kept[np.argsort(groups[kept], kind="stable")]
