"""The batched cull (cull_groups) keeps exactly what cull_plans keeps, group by group."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cascader.core.pareto import cull_groups, cull_plans

# Costs near 2**24 and beyond collide in single precision, which is where ties get subtle.
COSTS = st.one_of(st.integers(0, 12), st.integers((1 << 25) - 8, (1 << 25) + 8))


def _one_by_one(groups, memory, cycles, limits, disable):
    kept = []
    for group in range(len(limits)):
        entries = [(memory[i], cycles[i], i) for i in range(len(groups)) if groups[i] == group]
        kept += [e[2] for e in cull_plans(entries, limits[group], disable)]
    return kept


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), COSTS, COSTS), max_size=60),
    st.lists(st.integers(-1, 5), min_size=4, max_size=4),
    st.booleans(),
)
def test_batched_cull_matches_cull_plans(entries, limits, disable):
    groups = np.array([g for g, _, _ in entries], dtype=np.int64)
    memory = np.array([m for _, m, _ in entries], dtype=np.int64)
    cycles = np.array([c for _, _, c in entries], dtype=np.int64)
    got = cull_groups(groups, memory, cycles, np.array(limits, dtype=np.int64), disable)
    assert got.tolist() == _one_by_one(groups, memory, cycles, limits, disable)


def test_batched_cull_on_a_real_sized_front():
    rng = np.random.default_rng(6)
    groups = rng.integers(0, 50, 5000)
    memory = rng.integers(0, 1 << 26, 5000)
    cycles = rng.integers(0, 1 << 26, 5000)
    limits = np.where(np.arange(50) % 2 == 0, 8, 32)
    got = cull_groups(groups, memory, cycles, limits, False)
    assert got.tolist() == _one_by_one(groups, memory, cycles, limits.tolist(), False)
