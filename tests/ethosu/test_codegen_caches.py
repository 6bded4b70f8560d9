"""The encodings and stripe costs kept across schedules give the very bytes and numbers
computed afresh: scale-bias records sliced per core equal Vela's per-channel encoding, a
stripe cost cached under one pool is the cost under any other, and the evaluator's input
with equal stripes sharing one operation scores as the full operations do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ethosu.vela.api import npu_encode_bias
from sessions import prepared_model

from cascader.core.options import CascaderOptions
from cascader.ethosu import vela_cost, weights
from cascader.ethosu.codegen import generate, scored_ops
from cascader.ethosu.memory import system_memory
from cascader.ethosu.perf import evaluate
from cascader.ethosu.weights import core_bias_streams, core_shares, core_weight_streams
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.npu_ops import Conv2D
from cascader.testing.networks import CATALOGUE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")


def _convs(accelerator: str) -> list[Conv2D]:
    prepared = prepared_model(load_tflite(EXAMPLE), accelerator)
    return [op for op in prepared.network.ops if isinstance(op, Conv2D)]


def _vela_bias_streams(accelerator: str, op: Conv2D, lo: int, hi: int, depth: int) -> list[bytes]:
    """Each core's channels encoded one by one with Vela's public API, end to end."""
    return [
        b"".join(
            bytes(npu_encode_bias(np.int64(b), int(m), int(s)))
            for b, m, s in zip(
                op.biases[channels], op.multipliers[channels], op.shifts[channels], strict=True
            )
        )
        for channels, _ in core_shares(accelerator, lo, hi, depth)
    ]


@pytest.mark.parametrize("accelerator", ["ethos-u55-256", "ethos-u65-512"])
def test_sliced_bias_records_are_vela_encoding_byte_for_byte(accelerator: str) -> None:
    for op in _convs(accelerator):
        channels = op.ofm.shape[3]
        for lo, hi, depth in [(0, channels, 16), (0, min(channels, 8), 8),
                              (channels // 2, channels, 32), (1, channels, 24)]:  # fmt: skip
            if lo >= hi:
                continue
            expected = _vela_bias_streams(accelerator, op, lo, hi, depth)
            assert core_bias_streams(accelerator, op, lo, hi, depth) == expected
            assert core_bias_streams(accelerator, op, lo, hi, depth) == expected  # cached


@pytest.mark.parametrize("accelerator", ["ethos-u55-256", "ethos-u65-512"])
def test_cached_weight_streams_are_a_fresh_encoding(accelerator: str) -> None:
    ops = _convs(accelerator)[:6]
    slices = [(op, lo, op.ofm.shape[3], depth) for op in ops for lo, depth in ((0, 16), (8, 32))]
    cached = [core_weight_streams(accelerator, *s) for s in slices]
    assert [core_weight_streams(accelerator, *s) for s in slices] == cached
    weights._BY_OP.clear()
    weights._ENCODED.clear()
    assert [core_weight_streams(accelerator, *s) for s in slices] == cached


def test_stripe_costs_cached_under_one_pool_are_those_of_another() -> None:
    prepared = prepared_model(load_tflite(EXAMPLE), U55[0])
    small, large = (system_memory(*U55, kib * 1024) for kib in (160, 2048))
    point = prepared.scheduler.schedule_point(small, CascaderOptions(enable_striping=True))
    ops = generate(point.schedule, U55[0], command_streams=False).scheduled_ops
    vela_cost.stripe_cost.memo.clear()
    evaluate(ops, small)
    warm = evaluate(ops, large)
    vela_cost.stripe_cost.memo.clear()
    cold = evaluate(ops, large)
    assert warm == cold
    assert warm.to_json() == cold.to_json()


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("name", ["example", "residual", "concat_skip", "SOFTMAX", "LOGISTIC"])
def test_shared_stripe_operations_score_as_the_full_ones(name: str, system: tuple) -> None:
    """`scored_ops` gives one operation to a part's equal stripes (softmax reads some inputs
    in other shapes, which keep their own operations; a lookup table's DMAs stay per
    stripe): the evaluator's report is the one of `generate`'s operations, number for
    number, on schedules striped at a small pool and whole at a large one."""
    model = load_tflite(EXAMPLE) if name == "example" else CATALOGUE[name]().build()
    prepared = prepared_model(model, system[0])
    options = CascaderOptions(enable_striping=True, always_copy_size=1 << 20)
    shared = False
    for pool in (32 * 1024, 1 << 20):
        memory = system_memory(*system, pool)
        schedule = prepared.scheduler.schedule_point(memory, options).schedule
        full = generate(schedule, system[0], command_streams=False).scheduled_ops
        ops = scored_ops(schedule, system[0])
        assert evaluate(ops, memory).to_json() == evaluate(full, memory).to_json()
        assert [len(op.stripes) for op in ops] == [len(op.stripes) for op in full]
        shared |= any(len({id(s) for s in op.stripes}) < len(op.stripes) for op in ops)
    assert shared or name != "example"
