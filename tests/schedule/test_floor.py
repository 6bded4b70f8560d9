"""The smallest SRAM mobilenet_v2_100_224 fits in on ethos-u55-256 (Shared_Sram: the input,
the output and every feature map in the SRAM arena, weights in flash), against Vela 5.2's
`--optimise Size` footprint of 353.5 KiB: rolling buffers hold only the rows one stripe reads,
and the sweep's seeds include the options of the smallest schedules."""

from __future__ import annotations

from dataclasses import replace

import pytest
from model_cases import model_path
from sessions import estimate, prepared_model, session
from test_schedule import check_allocation, check_schedule

from cascader.core.options import CascaderOptions
from cascader.core.proposal_generation import choose_proposal
from cascader.estimate import PointConfig
from cascader.ethosu.memory import system_memory
from cascader.ethosu.weights import encoded_size
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.schedule import Stripe
from cascader.schedule.point_scheduler import ProposalKey
from cascader.schedule.policies import proposal_schedule
from cascader.verify.point_check import verify_point
from dse.space import SMALLEST, SearchSpace

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
VELA_SIZE_FLOOR = 361_984  # Vela 5.2 --optimise Size, regor: 353.5 KiB
REGION = 4 << 20  # proposals generated once for a sweep's largest pool, as a sweep does


@pytest.fixture(scope="module")
def mobilenet() -> bytes:
    return load_tflite(model_path("mobilenet_v2_100_224"))


def _smallest_schedule(model: bytes, options: CascaderOptions):
    """The schedule of the proposal with the smallest budget, which a pool under every
    budget gets."""
    prepared = prepared_model(model, U55[0])
    memory = system_memory(*U55, REGION)
    options = replace(options, cascade_region=memory.cascade_area)
    smallest = prepared.scheduler.proposals(memory, options, REGION).proposals[0]
    size = encoded_size(U55[0], prepared.network.ops)
    schedule = proposal_schedule(prepared.network, smallest, memory, size, check=False)
    return smallest, schedule.fallback or schedule  # its least SRAM form


def test_rolling_buffers_hold_only_the_rows_one_stripe_reads(mobilenet: bytes) -> None:
    proposal, schedule = _smallest_schedule(
        mobilenet, CascaderOptions(enable_striping=True, always_copy_size=0)
    )
    check_schedule(schedule)
    check_allocation(schedule)
    rolling = {b.index: b for b in schedule.buffers if b.kind == "rolling"}
    assert rolling
    read_rows = dict.fromkeys(rolling, 0)
    for step in schedule.steps:
        if isinstance(step, Stripe):
            for box, buf, _ in step.ifms:
                if buf in read_rows:
                    read_rows[buf] = max(read_rows[buf], box.shape[1])
    assert {i: b.rows for i, b in rolling.items()} == read_rows
    # The first plan (the stem to the first 56x56x24 tensor) starts with a one-row stripe:
    # with two-row stripes its first stripe would need a fifth row of two rolling buffers.
    stem = next(p for p in proposal.plans if len(p.part_ids) == 6)
    heights = [s.ofm.shape[1] for s in schedule.stripes_of(min(stem.part_ids))]  # its output
    assert heights[0] == 1 and set(heights[1:-1]) == {2}
    # Below the cascader's own budget, and below Vela's smallest footprint.
    assert schedule.sram_bytes < proposal.memory_usage
    assert schedule.sram_bytes < VELA_SIZE_FLOOR


def test_the_smallest_options_need_100_kib_less_than_vela_and_run_bit_exactly(
    mobilenet: bytes,
) -> None:
    # A pool under every proposal's budget gets, of the smallest few, the one that really
    # needs least: no more than the smallest budget's.
    options = CascaderOptions(**SMALLEST.cascader_options())
    found = session(mobilenet, *U55)
    result = verify_point(found, PointConfig(128 * 1024, options, REGION))
    schedule = result.point.schedule
    cascade = result.point.cascade
    smallest = min(range(len(cascade.proposals)), key=lambda i: cascade.proposals[i].memory_usage)
    scheduler = found.prepared.scheduler
    key = ProposalKey(scheduler.cascade_key(result.point.memory, options, REGION), smallest)
    assert schedule.sram_bytes <= scheduler.need(result.point.memory, cascade, key)
    assert schedule.sram_bytes < VELA_SIZE_FLOOR - 100 * 1024  # 250.4 KiB when written
    assert result.max_abs_diff()["schedule_vs_reference"] == 0
    check_allocation(schedule)


def test_a_sweep_seeds_the_smallest_schedules() -> None:
    space = SearchSpace(32 * 1024, 4 << 20, cascader_optional=True)
    seeded = [{k: v for k, v in p.items() if k != "sram_units"} for p in space.seed_points(16)]
    assert {
        **SMALLEST.cascader_options(),
        "enable_cascader": True,
        "buffer_weights": True,
        "narrow_nhwc": False,
    } in seeded


def test_a_pool_gets_a_proposal_whose_schedule_really_fits(mobilenet: bytes) -> None:
    # At 256 KiB the cascader's own choice (the fastest within its budget, 262,000 B) needs
    # 262,416 B once scheduled; the point takes a proposal whose schedule fits instead.
    options = CascaderOptions(**SMALLEST.cascader_options())
    pool = 256 * 1024
    memory = system_memory(*U55, pool)
    prepared = prepared_model(mobilenet, U55[0])
    cascaded = replace(options, cascade_region=memory.cascade_area)
    generated = prepared.scheduler.proposals(memory, cascaded, REGION)
    own = generated.proposals[choose_proposal(generated.proposals, pool)]
    assert own.memory_usage < pool
    result = estimate(mobilenet, *U55, pool, options, None, proposal_region_bytes=REGION)
    assert result.fits and result.sram_used_bytes <= pool
