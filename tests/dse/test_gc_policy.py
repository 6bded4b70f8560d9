"""The sweep's garbage collection policy (dse.gc_policy) and what it relies on: a cascade
leaves no garbage in reference cycles, so evaluations need no collection to free it."""

import gc
import weakref

from cascader.core import cascade
from cascader.ethosu.synthetic import GraphBuilder
from dse import gc_policy


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _garbage_after(action) -> list:
    """The objects `action` leaves unreachable in reference cycles."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        action()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    return found


def test_cascade_leaves_no_cyclic_garbage():
    builder = GraphBuilder()
    x = builder.conv(builder.input(32, 32, 8), 16, kernel=3, stride=2)
    x = builder.conv(builder.depthwise(x), 16)
    document = builder.build([builder.conv(builder.depthwise(x), 8)], sram_size=16384)

    def run() -> None:
        result = cascade(document.graph, document.regions, document.home_map, document.options)
        assert result.proposals

    kinds = {type(o).__name__ for o in _garbage_after(run)}
    assert not kinds & {"Plan", "Proposal", "TensorConfig", "_PlanUse"}


def test_collects_every_few_evaluations_and_restores_the_collector():
    was_enabled = gc.isenabled()
    with gc_policy.collected_between_evaluations():
        assert not gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 0  # the heap at entry is left out of the collections
        with gc_policy.collected_between_evaluations():  # inner blocks change nothing
            assert not gc.isenabled()
        leftovers = [_Cycle() for _ in range(100)]
        alive = weakref.WeakSet(leftovers)
        del leftovers
        for _ in range(gc_policy.COLLECT_EVERY - 1):
            gc_policy.after_evaluation()
        assert len(alive) == 100  # not collected yet
        gc_policy.after_evaluation()
        assert not alive
        assert gc.get_freeze_count() == frozen
        made = [[n] for n in range(10_000)]
        assert gc.get_count()[0] >= len(made)
    assert gc.isenabled() == was_enabled
    assert gc.get_freeze_count() == 0
    # What the block made joined the old generation: no young collection has it to scan.
    assert gc.get_count()[0] < len(made)


def test_outside_a_block_evaluations_leave_the_collector_alone():
    gc.disable()
    try:
        [_Cycle() for _ in range(10)]
        before = gc.get_count()[0]
        for _ in range(gc_policy.COLLECT_EVERY):
            gc_policy.after_evaluation()
        assert gc.get_count()[0] >= before
    finally:
        gc.enable()
