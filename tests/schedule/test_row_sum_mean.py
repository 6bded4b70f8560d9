"""A mean's sum rows first (`PointConfig.row_sum_mean`, `cascader.schedule.row_sums`): a 1 x W
all-ones depthwise into H x 1 x C int16, then an H x 1 one into the 1 x 1 x C int32 sum the
mean's MUL reads. The split computes the same sums as the one whole-window depthwise (on the
reference, at the int16 row sums' extremes too), gives the same bytes on the reference and
the simulator, and lets DS-CNN's last layers run in row stripes into the mean instead of
holding its 16,000-byte input whole; those schedules are proven on the simulator."""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from proofs import proven, small_options
from sessions import session

from cascader.artifact.run import firmware_runner
from cascader.core.tensor_config import TensorConfigState
from cascader.estimate import PointConfig
from cascader.frontend.mean import legalize_mean
from cascader.ir.npu_ops import Conv2D, NpuTensor, Quant
from cascader.reference.run import run_op
from cascader.schedule.row_sums import row_sum_means, split_sum
from cascader.testing.architectures import ds_cnn
from cascader.testing.tflite_builder import ModelBuilder
from cascader.verify.hybrid import HybridModel
from cascader.verify.litert import random_inputs

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
SHAPES = [(25, 10, 64), (7, 7, 32)]
SAMPLES = 4


def _mean_sum(shape: tuple[int, int, int], zero_point: int) -> Conv2D:
    """The whole-window sum `legalize_mean` makes of a mean over H and W of `shape`."""
    ifm = NpuTensor("x", (1, *shape), Quant(0.05, zero_point))
    ofm = NpuTensor("y", (1, 1, 1, shape[-1]), Quant(0.02, 3))
    return legalize_mean("y", ifm, ofm, [1, 2])[0]


@pytest.mark.parametrize("shape", [*SHAPES, (2, 128, 16)], ids=str)
@pytest.mark.parametrize("fill", ["random", "extremes"])
def test_row_sums_then_their_sum_are_the_whole_window_sum(shape: tuple, fill: str) -> None:
    zero_point = -128 if fill == "extremes" else -7
    whole = _mean_sum(shape, zero_point)
    split = split_sum(whole)
    assert split is not None
    rows, total = split
    assert rows.ofm.dtype == "int16" and rows.ofm.shape == (1, shape[0], 1, shape[2])
    assert (rows.kernel.height, rows.kernel.width) == (1, shape[1])
    assert total.ofm == whole.ofm and (total.kernel.height, total.kernel.width) == (shape[0], 1)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, *shape), dtype=np.int8)
    if fill == "extremes":  # every row sum at its largest: W * 255 (128 columns: 32,640)
        x[:] = 127
    one: dict[str, np.ndarray] = {"x": x}
    two: dict[str, np.ndarray] = {"x": x}
    expected = run_op(whole, one)
    for op in split:
        run_op(op, two)
    got = two[whole.ofm.name]
    assert expected.dtype == got.dtype == np.int32
    np.testing.assert_array_equal(got, expected)
    if fill == "extremes":
        assert int(expected.max()) == shape[0] * shape[1] * 255


def test_only_a_whole_window_sum_that_fits_splits() -> None:
    assert split_sum(_mean_sum((65, 2, 16), 0)) is None  # over 64 kernel rows
    assert split_sum(_mean_sum((4, 129, 16), 0)) is None  # a row sum could pass int16
    assert split_sum(_mean_sum((1, 10, 16), 0)) is None  # one row: nothing to split


@cache
def _mean_net(shape: tuple[int, int, int]) -> bytes:
    b = ModelBuilder(0, 2, name="mean")
    x = b.conv2d(b.input((1, *shape[:2], 8)), shape[2], kernel=1, activation="RELU")
    b.output(b.mean(x, keep_dims=False))
    return b.build()


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_both_forms_give_the_same_bytes_on_the_reference_and_the_simulator(
    system: tuple, shape: tuple
) -> None:
    found = session(_mean_net(shape), *system)
    assert found.prepared.sums_rows
    rng = np.random.default_rng(1)
    drawn = [random_inputs(found.model_bytes, rng) for _ in range(SAMPLES)]
    results = []
    for rows in (False, True):
        config = PointConfig(1 << 20, small_options("vela", False), row_sum_mean=rows)
        functions = found.prepared_for(config).network.functions
        assert any(op.ofm.dtype == "int16" for f in functions for op in f.ops) is rows
        hybrid = HybridModel(found.model_bytes, functions)
        with contextlib.redirect_stdout(io.StringIO()):
            runner = firmware_runner(found, config)
        referenced = [hybrid.run(inputs) for inputs in drawn]
        simulated = []
        for inputs in drawn:
            outputs, findings = runner(inputs)
            assert findings == []
            simulated.append(outputs)
        results.append((referenced, simulated))
    (ref_one, sim_one), (ref_two, sim_two) = results
    for a, b, c, d in zip(ref_one, sim_one, ref_two, sim_two, strict=True):
        for values in (b, c, d):
            assert [v.tobytes() for v in values] == [v.tobytes() for v in a]
    assert len({v.tobytes() for outs in ref_one for v in outs}) > 1  # outputs vary


def test_a_model_without_such_a_mean_keeps_one_network() -> None:
    b = ModelBuilder(0, 2, name="no_mean")
    b.output(b.conv2d(b.input((1, 8, 8, 8)), 16, kernel=3, activation="RELU"))
    found = session(b.build(), *U55)
    assert not found.prepared.sums_rows
    config = PointConfig(1 << 20, small_options("vela", False), row_sum_mean=True)
    assert found.prepared_for(config) is found.prepared
    function = found.prepared.functions[0]
    assert row_sum_means(function) == (function, {})


def _row_sum_part(found, config: PointConfig) -> int:
    """The part summing the mean's rows (the one op writing int16)."""
    net = found.prepared_for(config).network
    (pid,) = [p for p, op in enumerate(net.ops) if op.ofm.dtype == "int16"]
    return pid


def _row_sums_in_a_cascade(found, config: PointConfig) -> bool:
    """Whether the chosen proposal runs the row sums interior to a plan of several parts,
    reading an input that no buffer holds whole."""
    with contextlib.redirect_stdout(io.StringIO()):
        point = found.schedule(config)
    pid = _row_sum_part(found, config)
    source = found.prepared_for(config).network.graph.parts[pid].inputs[0].id
    whole = {b.tensor for b in point.schedule.buffers if b.kind == "tensor"}
    plans = [p for p in point.cascade.chosen.plans if p.part_group >> pid & 1]
    interior = {
        c.tensor.id for c in plans[0].tensor_configs if c.state == TensorConfigState.INTERIOR
    }
    return plans[0].part_group.bit_count() > 2 and source in interior and source not in whole


def _cascaded_row_sums(found) -> PointConfig:
    """The smallest pool, in 256-byte steps from the smallest proposal's budget that runs
    the row sums interior to a cascade, whose schedule does (smaller ones lay the layers'
    outputs over their inputs instead, `test_upward`)."""
    config = PointConfig(4096, small_options("vela", False), 1 << 20, row_sum_mean=True)
    with contextlib.redirect_stdout(io.StringIO()):
        proposals = found.schedule(config).cascade.proposals
    pid = _row_sum_part(found, config)
    first = next(p for p in proposals if any(
        plan.part_group >> pid & 1 and plan.part_group.bit_count() > 2 for plan in p.plans
    ))  # fmt: skip
    for pool in range(first.memory_usage, first.memory_usage + 8192, 256):
        if _row_sums_in_a_cascade(found, replace(config, sram_bytes=pool)):
            return replace(config, sram_bytes=pool)
    raise AssertionError("no pool runs the row sums in a cascade")


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
def test_ds_cnn_runs_its_mean_in_row_stripes_bit_exact(system: tuple) -> None:
    found = session(ds_cnn().build(), *system)
    config = _cascaded_row_sums(found)  # the mean's input held by no buffer whole
    checked = proven(found, config, SAMPLES)
    for out in checked.outputs:
        assert out.reference_vs_litert.max_abs_diff <= checked.litert_tolerance <= 1
