"""Stripe schedules executed on the integer reference, stripe by stripe from byte buffers,
equal the unscheduled reference bit for bit: every builder case and the example network, with
the cascader's schedules at the smallest pool that fits, at 256 KiB and at 1 MiB, striping on,
off and multi-dimensional, and the copy-constants schedule. A propagator that reads too little
and a schedule that reads what it has not produced, or past its buffer, stop the run."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest
from sessions import prepared_model

from cascader.core.options import CascaderOptions
from cascader.core.propagator import Propagator
from cascader.ethosu.memory import SystemMemory, system_memory
from cascader.ir.npu_ops import Conv2D
from cascader.ir.schedule import Schedule, Stripe
from cascader.pipeline import PreparedModel
from cascader.reference.striped import StripedExecutor, StripeError
from cascader.schedule.point_scheduler import Point
from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir
from cascader.verify.litert import random_inputs
from cascader.verify.model_reference import ModelReference

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
_COMPOSITIONS = {"chain", "residual", "concat_skip", "branches", "mobilenet_like"}
_SINGLE_OPS = sorted(set(CATALOGUE) - _COMPOSITIONS)
_MODES = {
    "striping": CascaderOptions(enable_striping=True),
    "no-striping": CascaderOptions(enable_striping=False),
    "multi-dimensional": CascaderOptions(
        enable_striping=True, enable_multi_dimensional_striping=True
    ),
}
KIB = 1024


def _memory(pool: int) -> SystemMemory:
    return system_memory("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", pool)


@dataclasses.dataclass(frozen=True)
class _Built:
    model: bytes
    prepared: PreparedModel
    inputs: list[np.ndarray]
    expected: list[np.ndarray]


@functools.cache
def _built(name: str) -> _Built:
    if name == "example":
        model = _EXAMPLE.read_bytes()
    elif name in CATALOGUE:
        model = CATALOGUE[name]().build()
    else:
        root = shared_dir()
        path = root / "models" / f"{name}.tflite" if root else None
        if path is None or not path.is_file():
            pytest.skip("shared models not present")
        model = path.read_bytes()
    inputs = random_inputs(model, np.random.default_rng(3))
    expected = ModelReference.from_model(model, name)(inputs)
    return _Built(model, prepared_model(model, "ethos-u55-256"), inputs, expected)


def _smallest_fitting(prepared: PreparedModel, options: CascaderOptions) -> Point:
    """The cascader's schedule at the smallest pool it fits in: start from what the smallest
    proposal's schedule holds, grow until the chosen schedule fits."""
    pool = max(prepared.scheduler.schedule_point(_memory(KIB), options).schedule.sram_bytes, KIB)
    for _ in range(30):
        point = prepared.scheduler.schedule_point(_memory(pool), options)
        if point.fits:
            return point
        pool = max(pool + KIB, point.schedule.sram_bytes)
    raise AssertionError("no pool fits")


def _point(built: _Built, mode: str, pool: str) -> Point:
    if mode == "off":
        return built.prepared.scheduler.schedule_point(_memory(256 * KIB), None)
    if pool == "smallest":
        return _smallest_fitting(built.prepared, _MODES[mode])
    size = {"256KiB": 256 * KIB, "1MiB": KIB * KIB}[pool]
    return built.prepared.scheduler.schedule_point(_memory(size), _MODES[mode])


def _assert_schedule_matches(built: _Built, schedule: Schedule) -> int:
    executor = StripedExecutor(schedule)
    got = executor.run(built.inputs)
    for ours, theirs in zip(got, built.expected, strict=True):
        np.testing.assert_array_equal(ours.reshape(theirs.shape), theirs)
    return executor.stripes_run


@pytest.mark.parametrize("mode", [*_MODES, "off"])
@pytest.mark.parametrize("case", _SINGLE_OPS)
def test_single_op_schedule_equals_reference(case: str, mode: str) -> None:
    built = _built(case)
    _assert_schedule_matches(built, _point(built, mode, "smallest").schedule)


@pytest.mark.parametrize("pool", ["smallest", "256KiB", "1MiB"])
@pytest.mark.parametrize("mode", list(_MODES))
@pytest.mark.parametrize("name", [*sorted(_COMPOSITIONS - {"mobilenet_like"}), "example"])
def test_network_schedule_equals_reference(name: str, mode: str, pool: str) -> None:
    built = _built(name)
    point = _point(built, mode, pool)
    assert point.fits
    stripes = _assert_schedule_matches(built, point.schedule)
    parts = sum(not p.in_line for p in built.prepared.network.graph.parts)
    if mode != "no-striping" and pool == "smallest" and name != "concat_skip":
        assert stripes > parts  # something was striped


@pytest.mark.parametrize("name", ["example", "kws_dscnn", "ic_resnet8"])
def test_copy_constants_schedule_equals_reference(name: str) -> None:
    built = _built(name)
    _assert_schedule_matches(built, _point(built, "off", "").schedule)


@pytest.mark.parametrize(
    "name", ["mobilenet_like", "kws_dscnn", "ic_resnet8", "vww_mobilenet_v1_025"]
)
def test_model_schedule_at_256kib_equals_reference(name: str) -> None:
    built = _built(name)
    _assert_schedule_matches(built, _point(built, "striping", "256KiB").schedule)


def _striped_conv(built: _Built, schedule: Schedule) -> int:
    """A part with a 3x3 convolution computed in more than one stripe along H."""
    for part in built.prepared.network.graph.parts:
        op = built.prepared.network.ops[part.id]
        stripes = schedule.stripes_of(part.id)
        rows = {s.ofm.start[1] for s in stripes}
        if isinstance(op, Conv2D) and op.kernel.height == 3 and len(rows) > 1:
            return part.id
    raise AssertionError("no striped 3x3 convolution")


def test_a_propagator_reading_too_few_rows_is_caught() -> None:
    """The same schedule checked against a conv IFM propagator that forgets the kernel's
    extra rows: the first stripe past the top needs rows it does not name."""
    built = _built("chain")
    schedule = _point(built, "striping", "smallest").schedule
    pid = _striped_conv(built, schedule)
    good = built.prepared.network.graph.parts[pid].propagators
    transform = good[0].transform.copy()
    transform[1, -1] = 0  # rows: stride * out, no (kernel - stride)
    broken = [Propagator(transform.tolist(), list(good[0].offset)), *good[1:]]
    with pytest.raises(StripeError, match=r"stripe Box.*needs Box.*propagator gives only"):
        StripedExecutor(schedule, propagators={pid: broken}).run(built.inputs)


def test_a_stripe_reading_what_was_not_produced_is_caught() -> None:
    built = _built("chain")
    schedule = _point(built, "striping", "smallest").schedule
    pid = _striped_conv(built, schedule)
    producer = next(p.id for p in schedule.network.graph.parts if p.output is
                    schedule.network.graph.parts[pid].inputs[0])  # fmt: skip
    first = next(s for s in schedule.steps if isinstance(s, Stripe) and s.part == producer)
    skipped = dataclasses.replace(schedule, steps=[s for s in schedule.steps if s is not first])
    with pytest.raises(StripeError, match=r"elements not produced yet"):
        StripedExecutor(skipped).run(built.inputs)


def test_a_read_outside_its_buffer_is_caught() -> None:
    """A rolling or window buffer one row shorter than the schedule made it."""
    built = _built("chain")
    schedule = _point(built, "striping", "smallest").schedule
    index = next(b.index for b in schedule.buffers if b.kind in ("rolling", "window")
                 and len(b.frame) == 4 and b.frame[1] > 1)  # fmt: skip
    buffers = list(schedule.buffers)
    short = (buffers[index].frame[0], buffers[index].frame[1] - 1, *buffers[index].frame[2:])
    buffers[index] = dataclasses.replace(buffers[index], frame=short)
    with pytest.raises(StripeError, match=r"outside"):
        StripedExecutor(dataclasses.replace(schedule, buffers=buffers)).run(built.inputs)
