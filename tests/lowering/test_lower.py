"""A stripe schedule lowered to TIR and read back: the command streams, constants and scratch
compiled from the TIR are byte-identical to those compiled straight from the schedule, with
the cascader on (striping) and off, on the example model and catalogue networks."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from sessions import prepared_model

from cascader.core.options import CascaderOptions
from cascader.ethosu.codegen import generate
from cascader.ethosu.memory import system_memory
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.schedule import Copy, Stripe
from cascader.lowering.lower import (
    CYCLES_ATTR,
    PLAN_ATTR,
    STRIPE_ATTR,
    lower,
    op_attributes,
    plan_nest,
)
from cascader.lowering.tir_to_npu import compile_tir, npu_calls, schedule_from_tir
from cascader.testing.networks import CATALOGUE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
STRIPING = CascaderOptions(enable_striping=True)


def _point(model: bytes, system: tuple[str, str, str], pool: int, options):
    prepared = prepared_model(model, system[0])
    return prepared, prepared.scheduler.schedule_point(system_memory(*system, pool), options)


def _assert_identical(prepared, point, accelerator: str) -> None:
    direct = generate(point.schedule, accelerator)
    funcs = lower(point.schedule)
    via = compile_tir(funcs, prepared.network, point.memory, accelerator)
    assert len(via.functions) == len(direct.functions) == len(prepared.network.functions)
    for a, b in zip(direct.functions, via.functions, strict=True):
        assert a.command_stream == b.command_stream and len(a.command_stream) > 0
        assert a.driver_payload == b.driver_payload
    assert via.constants == direct.constants
    assert (via.scratch_bytes, via.arena_bytes) == (direct.scratch_bytes, direct.arena_bytes)
    assert [_summary(op) for op in via.scheduled_ops] == [
        _summary(op) for op in direct.scheduled_ops
    ]


def _summary(op) -> tuple:
    """What the evaluator reads of a scheduled op, beside its stripes' Vela operations."""
    return (op.name, len(op.stripes), op.ifm_area, op.ofm_area, op.ifm2_area, op.const_area,
            op.weight_source_area, op.lut_source_area, op.lut_bytes)  # fmt: skip


@pytest.mark.parametrize("pool", [48 * 1024, 256 * 1024])
@pytest.mark.parametrize("options", [STRIPING, None], ids=["cascader", "copy-constants"])
def test_the_example_compiles_identically_from_tir(pool: int, options) -> None:
    prepared, point = _point(load_tflite(EXAMPLE), U55, pool, options)
    _assert_identical(prepared, point, U55[0])


@pytest.mark.parametrize("case", ["chain", "branches", "residual", "concat_skip", "SOFTMAX",
                                  "RESIZE_BILINEAR", "SPLIT-height-4", "PAD"])  # fmt: skip
@pytest.mark.parametrize("options", [STRIPING, None], ids=["cascader", "copy-constants"])
def test_catalogue_networks_compile_identically_from_tir(case: str, options) -> None:
    prepared, point = _point(CATALOGUE[case]().build(), U55, 32 * 1024, options)
    _assert_identical(prepared, point, U55[0])


def test_u65_cascades_compile_identically_from_tir() -> None:
    prepared, point = _point(CATALOGUE["residual"]().build(), U65, 16 * 1024, STRIPING)
    _assert_identical(prepared, point, U65[0])


def test_the_tir_holds_one_call_per_step_under_plan_and_stripe_loops() -> None:
    prepared, point = _point(load_tflite(EXAMPLE), U55, 48 * 1024, STRIPING)
    schedule = point.schedule
    (func,) = lower(schedule)
    allocations, calls = npu_calls(func)
    assert len(calls) == len(schedule.steps)
    used = {b for s in schedule.steps for b in _buffer_indices(s)}
    assert len(allocations) == len(used)
    script = func.script()
    plans = {s.plan for s in schedule.steps if isinstance(s, Stripe)}
    assert script.count(f'"{PLAN_ATTR}"') == len(plans)
    assert script.count(f'"{STRIPE_ATTR}"') > len(plans)  # some plans are striped
    hints = [int(h) for h in re.findall(rf'"{CYCLES_ATTR}", T.int64\((\d+)\)', script)]
    assert len(hints) == sum(isinstance(s, Stripe) for s in schedule.steps)
    assert min(hints) > 0
    rebuilt = schedule_from_tir([func], prepared.network, point.memory)
    assert [type(s) for s in rebuilt.steps] == [type(s) for s in schedule.steps]
    assert [s.ofm for s in rebuilt.steps if isinstance(s, Stripe)] == [
        s.ofm for s in schedule.steps if isinstance(s, Stripe)
    ]


def _buffer_indices(step) -> set[int]:
    if isinstance(step, Stripe):
        found = {step.ofm_buffer, step.weights_buffer, step.bias_buffer}
        found |= {b for _, b, _ in step.ifms}
    else:
        found = {step.source, step.dest}
    return found - {-1}


def test_s_tir_builds_the_stripe_loops_of_a_cascade() -> None:
    """A three-part cascade of the example: s_tir splits the output into as many stripes as
    the schedule runs, computes both producers at the stripe loop and caches the copied
    constants in SRAM there."""
    _, point = _point(load_tflite(EXAMPLE), U55, 48 * 1024, STRIPING)
    schedule = point.schedule
    by_plan: dict[int, list] = {}
    for step in schedule.steps:
        by_plan.setdefault(getattr(step, "plan", None), []).append(step)
    plans = [
        p
        for p, steps in by_plan.items()
        if len({s.part for s in steps if isinstance(s, Stripe)}) == 3
    ]
    assert plans
    steps = _with_copies(schedule.steps, plans[0])
    stripes = [s for s in steps if isinstance(s, Stripe)]
    output = stripes[-1].part
    func, loops = plan_nest(schedule, steps)
    names = [name for name, _ in loops]
    assert len(names) == 4 and all(name.endswith("_0") for name in names)  # the outer halves
    assert math.prod(e for _, e in loops) == sum(s.part == output for s in stripes) > 1
    text = func.script()
    body = text[text.index(f"for {', '.join(names)} in T.grid") :]
    assert text[: len(text) - len(body)].count("with T.sblock") == 1  # the root: all under the loop
    assert body.count("with T.sblock") >= 3
    assert "weights_global.sram" in body and any(isinstance(s, Copy) for s in steps)


def _with_copies(steps: list, plan: int) -> list:
    """The steps of one plan, the copies before its stripes included."""
    chosen, pending = [], []
    for step in steps:
        if isinstance(step, Copy):
            pending.append(step)
            continue
        if step.plan == plan:
            chosen += [*pending, step]
        pending = []
    return chosen


def test_the_ops_run_as_their_tir_attributes_say() -> None:
    """Codegen from TIR takes each op's attributes from its calls, not from the network: a
    schedule lowered with a changed activation clamp compiles to that clamp's stream."""
    prepared, point = _point(CATALOGUE["chain"]().build(), U55, 256 * 1024, None)
    schedule = point.schedule
    part = next(s.part for s in schedule.steps if isinstance(s, Stripe) and s.channels)
    op = schedule.network.ops[part]
    clamped = replace(op, activation=replace(op.activation, kind="CLAMP", clamp_max=100))
    ops = tuple(clamped if i == part else o for i, o in enumerate(schedule.network.ops))
    changed = replace(schedule, network=replace(schedule.network, ops=ops))
    assert op_attributes(clamped)["activation"]["clamp_max"] == 100
    via = compile_tir(lower(changed), prepared.network, point.memory, U55[0])
    expected = generate(changed, U55[0]).functions[0].command_stream
    assert via.functions[0].command_stream == expected
    assert expected != generate(schedule, U55[0]).functions[0].command_stream
