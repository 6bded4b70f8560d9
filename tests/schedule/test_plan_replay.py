"""Plans replayed from a sweep's earlier schedules give the schedules built afresh: every
proposal of a cascade, scheduled while the records of all its neighbours' plans are kept, has
the steps, buffers, addresses, lifetimes and extents it has when scheduled with none kept, on
Ethos-U55 (Shared_Sram) and on Ethos-U65 (Dedicated_Sram, where plans home tensors in SRAM or
DRAM), and a weight-size function that disagrees with a record or a remembered weight
placement is not given it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sessions import prepared_model

from cascader.core.options import CascaderOptions
from cascader.ethosu.memory import system_memory
from cascader.ethosu.weights import encoded_size
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.schedule import Schedule
from cascader.memo import caches_on
from cascader.schedule.policies import proposal_schedule

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
SYSTEMS = [
    ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram"),
]
REGION = 512 * 1024


def _facts(built: Schedule) -> tuple:
    buffers = [(b.to_json(), b.first, b.last, b.rows, b.dtype_bytes) for b in built.buffers]
    return built.steps, buffers, built.tensor_buffer, built.extents


def _forget(net) -> None:
    """Drop what earlier schedules left on the network: plan records and weight placements."""
    net.plan_records.clear()
    net.placements.clear()


def _cascade(system: tuple[str, str, str]):
    prepared = prepared_model(load_tflite(EXAMPLE), system[0])
    memory = system_memory(*system, REGION)
    options = CascaderOptions(enable_striping=True, cascade_region=memory.cascade_area)
    result = prepared.scheduler.proposals(memory, options, REGION)
    return prepared.network, memory, result.proposals


@pytest.mark.parametrize("system", SYSTEMS, ids=["u55", "u65"])
def test_replayed_plans_schedule_as_built_afresh(system: tuple[str, str, str]) -> None:
    net, memory, props = _cascade(system)
    sizes = encoded_size(memory.accelerator, net.ops)
    cold = []
    for proposal in props:
        _forget(net)
        cold.append(_facts(proposal_schedule(net, proposal, memory, sizes, check=False)))
    _forget(net)
    for proposal in props:  # every plan recorded once
        proposal_schedule(net, proposal, memory, sizes, check=False)
    recorded = len(net.plan_records)
    assert recorded < sum(len(p.plans) for p in props)  # neighbours share plans
    warm = [_facts(proposal_schedule(net, p, memory, sizes, check=False)) for p in props]
    assert len(net.plan_records) == recorded  # every plan replayed
    assert warm == cold


@pytest.mark.caches
def test_remembered_weight_placements_schedule_as_placed_afresh() -> None:
    net, memory, props = _cascade(SYSTEMS[0])
    sizes = encoded_size(memory.accelerator, net.ops)
    cold = []
    for proposal in props:
        _forget(net)
        cold.append(_facts(proposal_schedule(net, proposal, memory, sizes, check=False)))
    for proposal in props:  # every placement remembered once
        proposal_schedule(net, proposal, memory, sizes, check=False)
    placed = len(net.placements)
    assert placed > 0  # one-op plans that copy their weights
    warm = []
    for proposal in props:
        net.plan_records.clear()  # plans run again, their placements remembered
        warm.append(_facts(proposal_schedule(net, proposal, memory, sizes, check=False)))
    assert len(net.placements) == placed  # every placement reused
    assert warm == cold


def test_a_record_needs_the_weight_sizes_it_was_made_with() -> None:
    net, memory, props = _cascade(SYSTEMS[0])
    sizes = encoded_size(memory.accelerator, net.ops)
    proposal = max(props, key=lambda p: p.memory_usage)  # copies weights into SRAM
    _forget(net)
    proposal_schedule(net, proposal, memory, sizes, check=False)

    def padded(part: int, lo: int, hi: int, depth: int) -> int:
        return sizes(part, lo, hi, depth) + 64

    replayed = proposal_schedule(net, proposal, memory, padded, check=False)
    _forget(net)
    fresh = proposal_schedule(net, proposal, memory, padded, check=False)
    assert _facts(replayed) == _facts(fresh)
    assert _facts(fresh) != _facts(proposal_schedule(net, proposal, memory, sizes, check=False))


def test_plans_of_another_cascader_run_replay_as_built_afresh() -> None:
    """Records are kept by what a plan is, not by the cascader's plan object, so the plans
    one run shares with another are replayed from the other's records, to the same schedule."""
    prepared = prepared_model(load_tflite(EXAMPLE), SYSTEMS[0][0])
    net, memory = prepared.network, system_memory(*SYSTEMS[0], REGION)
    sizes = encoded_size(memory.accelerator, net.ops)
    options = CascaderOptions(enable_striping=True, cascade_region=memory.cascade_area)
    runs = [
        prepared.scheduler.proposals(memory, replace(options, stripe_factors=k), REGION).proposals
        for k in (3, 4)
    ]
    cold = []
    for proposal in runs[1]:
        _forget(net)
        cold.append(_facts(proposal_schedule(net, proposal, memory, sizes, check=False)))
    _forget(net)
    for proposal in runs[0]:
        proposal_schedule(net, proposal, memory, sizes, check=False)
    before = len(net.plan_records)
    warm = [_facts(proposal_schedule(net, p, memory, sizes, check=False)) for p in runs[1]]
    added = len(net.plan_records) - before
    _forget(net)
    for proposal in runs[1]:
        proposal_schedule(net, proposal, memory, sizes, check=False)
    assert warm == cold
    if caches_on():
        assert added < len(net.plan_records)  # some of the second run's plans were the first's
