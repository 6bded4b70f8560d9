"""Elementwise outputs written over an input, as Vela's allocator places them, and the "vela"
cost model's budgets counting SRAM as the schedule takes it (in-place outputs once, copied
weights encoded): schedules that share bytes still run bit for bit like the reference, and a
proposal's budget is what its schedule really needs, within a few bytes of alignment."""

from __future__ import annotations

import contextlib
import dataclasses
import io

import numpy as np
import pytest
from sessions import estimate, prepared_model

from cascader.core.options import CascaderOptions
from cascader.core.part import in_place_input
from cascader.ethosu.memory import system_memory
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.schedule import Schedule, Stripe
from cascader.pipeline import PreparedModel
from cascader.reference.striped import StripedExecutor
from cascader.schedule.allocation import overlays
from cascader.schedule.point_scheduler import ProposalKey
from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir
from cascader.verify.litert import random_inputs
from cascader.verify.model_reference import ModelReference

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
VELA = CascaderOptions(enable_striping=True, always_copy_size=0, cost_model="vela")
KIB = 1024


def _residual() -> tuple[bytes, PreparedModel]:
    model = CATALOGUE["residual"]().build()
    return model, prepared_model(model, U55[0])


def _outputs(model: bytes, schedule: Schedule) -> tuple[list, list]:
    inputs = random_inputs(model, np.random.default_rng(5))
    expected = ModelReference.from_model(model, "case")(inputs)
    return StripedExecutor(schedule).run(inputs), expected


def _in_place_stripe(schedule: Schedule) -> Stripe:
    graph = schedule.network.graph
    return next(
        s
        for s in schedule.steps
        if isinstance(s, Stripe) and in_place_input(graph.parts[s.part]) >= 0
    )


def test_add_output_is_written_over_the_branch_not_the_skip() -> None:
    """A residual ADD reads the skip (also read by the block's first convolution) and the
    branch (read by the ADD alone): its output takes the branch's bytes, as in Vela, and the
    schedule, run on shared bytes, still equals the reference."""
    model, prepared = _residual()
    schedule = prepared.scheduler.schedule_point(system_memory(*U55, 64 * KIB), None).schedule
    stripe = _in_place_stripe(schedule)
    slot = in_place_input(prepared.network.graph.parts[stripe.part])
    out = schedule.buffers[stripe.ofm_buffer]
    branch = schedule.buffers[stripe.ifms[slot][1]]
    skip = schedule.buffers[stripe.ifms[1 - slot][1]]
    assert len(prepared.network.graph.parts[stripe.part].inputs[1 - slot].consumers) == 2
    assert (branch.address, branch.size) == (out.address, out.size)
    assert skip.address + skip.size <= out.address or out.address + out.size <= skip.address
    got, expected = _outputs(model, schedule)
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)


def test_executor_runs_on_shared_bytes() -> None:
    """The executor keeps one byte array per memory region, so a wrong placement shows: the
    ADD's skip input put over its output (the skip is read by both, but the ADD writes over
    it while the next block still needs the old values) changes the result."""
    model, prepared = _residual()
    schedule = prepared.scheduler.schedule_point(system_memory(*U55, 64 * KIB), None).schedule
    stripe = _in_place_stripe(schedule)
    slot = in_place_input(prepared.network.graph.parts[stripe.part])
    skip = stripe.ifms[1 - slot][1]
    buffers = list(schedule.buffers)
    buffers[skip] = dataclasses.replace(
        buffers[skip], address=schedule.buffers[stripe.ofm_buffer].address
    )
    got, expected = _outputs(model, dataclasses.replace(schedule, buffers=buffers))
    assert any(
        not np.array_equal(ours.reshape(theirs.shape), theirs)
        for ours, theirs in zip(got, expected, strict=True)
    )


def _needs(prepared: PreparedModel, options: CascaderOptions) -> list[tuple[int, int, bool]]:
    """(budget, SRAM its schedule really takes, whether the schedule may lay an output over
    an input) of every proposal for a 1 MiB region."""
    memory = system_memory(*U55, KIB * KIB)
    scheduler = prepared.scheduler
    generated = scheduler.proposals(memory, options, KIB * KIB)
    base = scheduler.cascade_key(memory, options, KIB * KIB)
    found = []
    with contextlib.redirect_stdout(io.StringIO()):  # Vela's allocator warnings
        for index, proposal in enumerate(generated.proposals):
            key = ProposalKey(base, index)
            schedule = scheduler.proposal_schedule(memory, generated, key).fitted(0)
            found.append((proposal.memory_usage, scheduler.need(memory, generated, key),
                          _lays(schedule)))  # fmt: skip
    return found


def _lays(schedule: Schedule) -> bool:
    """Whether the schedule has an output it may lay over an input
    (`schedule.allocation.overlays`), laid or not."""
    parts = schedule.network.graph.parts
    return bool(overlays(schedule.buffers, schedule.steps, parts, set(), {}))


@pytest.mark.parametrize("copy", [0, KIB * KIB])
@pytest.mark.parametrize("name", ["chain", "residual", "branches", "mobilenet_like"])
def test_vela_budgets_hold_their_schedules(name: str, copy: int) -> None:
    """Every proposal of the "vela" cost model whose schedule has no output to lay over an
    input fits its own budget but for alignment: an in-place output is not counted beside
    its input, copied weights count encoded (the previous accounting fell short by up to
    640 B on these networks). A budget counting outputs laid over their inputs plan by plan
    can fall short: the allocation lays a chain of them each below the one before, or keeps
    a pair apart where that packs the rest better, so the point scheduler checks a
    schedule's real SRAM; here it stays within half the budget again."""
    prepared = prepared_model(CATALOGUE[name]().build(), U55[0])
    options = dataclasses.replace(VELA, always_copy_size=copy)
    for budget, need, lays in _needs(prepared, options):
        assert need <= (1.5 * budget if lays else budget + 16), (budget, need)


def _shared_model(name: str) -> bytes:
    root = shared_dir()
    path = root / "models" / f"{name}.tflite" if root else None
    if path is None or not path.is_file():
        pytest.skip("shared models not present")
    return load_tflite(path)


def _estimate(model: bytes, pool: int, options: CascaderOptions) -> dict:
    with contextlib.redirect_stdout(io.StringIO()):
        return estimate(model, *U55, pool, options, proposal_region_bytes=4 * KIB * KIB).to_json()


def test_ic_resnet8_fits_where_vela_does() -> None:
    """ic_resnet8 on U55: Vela's smallest schedules take 35.0 KiB (its ADDs written over the
    branch); ours did not fit below 48 KiB. With the ADDs in place and budgets that count
    them so, a 35 KiB pool fits, faster than Vela's `--optimise Size` (216,849 cycles,
    ../shared/baselines)."""
    model = _shared_model("ic_resnet8")
    result = _estimate(model, 35 * KIB, VELA)
    assert result["fits"] and result["sram_used_bytes"] <= 35 * KIB
    assert result["total_cycles"] < 216_849
    budgets = sorted(budget for budget, _, _ in _needs(prepared_model(model, U55[0]), VELA))
    assert budgets[0] <= 35 * KIB


def test_ad_autoencoder_copied_weights_fit_their_budget() -> None:
    """ad_autoencoder on U55 (fully connected layers, weights in flash): copying a layer's
    weights ahead of it saves cycles. Its encoded weights take 1.6x their elements; counted
    as elements, the smallest proposal needed 960 B against a 768 B budget and no 768 B pool
    fit. Counted encoded, 768 B fits, below Regor's 281,520 cycles at 768 B."""
    model = _shared_model("ad_autoencoder")
    for budget, need, _ in _needs(prepared_model(model, U55[0]), VELA):
        assert need <= budget + 16, (budget, need)
    result = _estimate(model, 768, VELA)
    assert result["fits"] and result["sram_used_bytes"] <= 768
    assert result["total_cycles"] < 281_520
