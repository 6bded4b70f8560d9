"""Properties of the cascader on random chain and branch graphs."""

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascader.core import CascaderOptions, cascade
from cascader.core.pareto import pareto_cull
from cascader.core.proposal_generation import choose_proposal
from cascader.ethosu.synthetic import GraphBuilder

OPS = st.sampled_from(["pointwise", "conv3x3", "depthwise", "depthwise_s2", "residual"])


@st.composite
def graphs(draw):
    """A chain of 2-5 ops on a small feature map; "residual" adds a branch (a pointwise conv
    beside the identity) joined by an add."""
    builder = GraphBuilder()
    x = builder.input(draw(st.sampled_from([8, 12, 16])), 8, draw(st.sampled_from([4, 8])))
    for op in draw(st.lists(OPS, min_size=2, max_size=5)):
        channels = draw(st.sampled_from([8, 16]))
        if op == "pointwise":
            x = builder.conv(x, channels)
        elif op == "conv3x3":
            x = builder.conv(x, channels, kernel=3)
        elif op == "depthwise":
            x = builder.depthwise(x)
        elif op == "depthwise_s2":
            x = builder.depthwise(x, 3, 2)
        else:
            x = builder.add(x, builder.conv(x, builder.shape(x)[3]))
    options = CascaderOptions(
        enable_striping=draw(st.booleans()),
        stripe_factors=draw(st.integers(2, 4)),
        max_plan_size=draw(st.integers(1, 4)),
        max_proposals=draw(st.integers(1, 8)),
    )
    return builder.build([x], draw(st.sampled_from([4096, 16384, 65536])), options)


def _dominates(a, b):
    return a[0] <= b[0] and a[1] <= b[1]


@settings(max_examples=25, deadline=None)
@given(graphs())
def test_proposals_cover_every_part_once_and_are_non_dominated(document):
    result = cascade(document.graph, document.regions, document.home_map, document.options)
    parts = len(document.graph.parts)
    assert result.proposals
    for proposal in result.proposals:
        ids = sorted(i for plan in proposal.plans for i in plan.part_ids)
        assert ids == list(range(parts))
    costs = [(p.memory_usage, p.cycles) for p in result.proposals]
    for i, a in enumerate(costs):
        for j, b in enumerate(costs):
            assert i == j or not _dominates(a, b)
    size = document.regions["SRAM"].size
    chosen = result.chosen
    if any(m < size for m, _ in costs):
        assert chosen.memory_usage < size
    else:
        assert chosen.memory_usage == min(m for m, _ in costs)


@settings(max_examples=10, deadline=None)
@given(graphs(), st.integers(1, 1 << 18), st.integers(1, 1 << 18))
def test_a_larger_region_never_chooses_more_cycles(document, small, extra):
    options = dataclasses.replace(document.options, max_proposals=16)
    proposals = cascade(document.graph, document.regions, document.home_map, options).proposals
    first = proposals[choose_proposal(proposals, small)]
    second = proposals[choose_proposal(proposals, small + extra)]
    assert second.cycles <= first.cycles


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=40),
    st.integers(1, 10),
)
def test_culled_sets_are_mutually_non_dominated_and_thinned(points, limit):
    memory = [m for m, _ in points]
    cycles = [c for _, c in points]
    kept = pareto_cull(list(range(len(points))), memory, cycles, limit, False)
    assert len(kept) <= limit
    for i in kept:
        for j in kept:
            assert i == j or not _dominates(points[i], points[j])
    # Every dropped point that is on the front was dropped by thinning, not by dominance.
    front = [
        i
        for i in range(len(points))
        if not any(
            _dominates(points[j], points[i]) and points[j] != points[i] for j in range(len(points))
        )
    ]
    if front and len({points[i] for i in front}) <= limit:
        assert {points[i] for i in kept} == {points[i] for i in front}
