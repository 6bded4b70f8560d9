"""Whole models with host operators: NPU functions on the integer reference, the rest on
litert, fed by what the NPU side computed; the result matches litert on the original model."""

from __future__ import annotations

import numpy as np
import pytest
from sessions import prepared_model

from cascader.core.options import CascaderOptions
from cascader.ethosu.memory import system_memory
from cascader.frontend.passes import model_npu_functions
from cascader.ir.schedule import Stripe
from cascader.reference.run import ReferenceError, run_function
from cascader.reference.striped import StripedExecutor, StripeError
from cascader.schedule.point_scheduler import Point
from cascader.testing.networks import CATALOGUE, host_op
from cascader.testing.tflite_builder import ModelBuilder
from cascader.verify.boundaries import NpuStep
from cascader.verify.hybrid import HostStep, HybridModel, run_model
from cascader.verify.litert import litert_outputs, random_inputs


def _sandwich() -> bytes:
    """conv -> host op -> conv: two NPU functions."""
    b = ModelBuilder(0, name="sandwich")
    y = b.conv2d(b.input((1, 8, 8, 8)), 8)
    y = host_op(b, y)
    b.output(b.conv2d(y, 8))
    return b.build()


def _skip_around_host() -> bytes:
    """conv -> host op -> conv, added to the first conv: the second function reads
    the first function's output directly and the host op's output."""
    b = ModelBuilder(1, name="skip around host")
    a = b.conv2d(b.input((1, 8, 8, 8)), 8)
    h = host_op(b, a)
    b.output(b.add(a, b.conv2d(h, 8)))
    return b.build()


def _host_first() -> bytes:
    """host op -> conv -> conv, and a second output from the host op."""
    b = ModelBuilder(2, name="host first")
    h = host_op(b, b.input((1, 8, 8, 4)))
    b.output(b.conv2d(b.conv2d(h, 8), 8), h)
    return b.build()


def _split_around_host() -> bytes:
    """conv -> split; one half through a host op, concatenated with the other half
    (the two halves share a quantisation, so only the dataflow tells them apart), and the
    conv's output reshaped as a second output."""
    b = ModelBuilder(3, name="split around host")
    a = b.conv2d(b.input((1, 8, 8, 8)), 8)
    first, second = b.split(a, 2)
    host = host_op(b, first)
    b.output(b.concatenation([host, second]), b.reshape(a, new_shape=(1, 512)))
    return b.build()


def _host_only() -> bytes:
    """A 3x nearest resize alone: nothing for the NPU."""
    b = ModelBuilder(4, name="host only")
    b.output(b.resize_nearest_neighbor(b.input((1, 4, 4, 4)), (12, 12)))
    return b.build()


def _max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> int:
    return max(int(np.abs(x.astype(int) - y.astype(int)).max()) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    ("make", "functions", "host"),
    [
        (_sandwich, 2, ("RESIZE_NEAREST_NEIGHBOR",)),
        (_skip_around_host, 2, ("RESIZE_NEAREST_NEIGHBOR",)),
        (_host_first, 1, ("RESIZE_NEAREST_NEIGHBOR",)),
        (_split_around_host, 2, ("RESIZE_NEAREST_NEIGHBOR", "RESHAPE")),
    ],
)
def test_models_with_host_ops_match_litert(make, functions: int, host: tuple[str, ...]) -> None:
    model = make()
    hybrid = HybridModel.from_model(model)
    assert len(hybrid.functions) == functions
    assert hybrid.host_ops == host
    rng = np.random.default_rng(0)
    for _ in range(2):
        inputs = random_inputs(model, rng)
        ours = hybrid(inputs)
        theirs = litert_outputs(model, inputs)
        assert [o.shape for o in ours] == [t.shape for t in theirs]
        assert _max_diff(ours, theirs) <= 1


def test_steps_run_in_dataflow_order_across_functions() -> None:
    hybrid = HybridModel.from_model(_skip_around_host())
    first, host, second = hybrid.steps
    assert isinstance(first, NpuStep) and isinstance(host, HostStep) and isinstance(second, NpuStep)
    assert host.inputs == first.outputs
    assert set(second.inputs) == {first.outputs[0], host.outputs[0]}
    assert second.outputs == hybrid.outputs
    assert not first.operators & second.operators and host.operator not in second.operators


def test_host_ops_compute_from_the_npu_results() -> None:
    """Perturb what the NPU returns: the host op and the next function see it, so the model's
    output moves; the runner is called per function in order with the TFLite tensors."""
    model = _sandwich()
    hybrid = HybridModel.from_model(model)
    inputs = random_inputs(model, np.random.default_rng(3))
    calls = []

    def shifted(index, function, values):
        calls.append((index, [v.shape for v in values]))
        out = run_function(function, values)
        return [np.clip(o.astype(int) + 9, -128, 127).astype(np.int8) for o in out]

    (exact,) = hybrid.run(inputs)
    (moved,) = hybrid.run(inputs, shifted)
    assert calls == [(0, [(1, 8, 8, 8)]), (1, [(1, 24, 24, 8)])]
    assert _max_diff([exact], [moved]) > 1


_CASCADER = {
    "striping": CascaderOptions(enable_striping=True),
    "no-striping": CascaderOptions(enable_striping=False),
    "multi-dimensional": CascaderOptions(
        enable_striping=True, enable_multi_dimensional_striping=True
    ),
    "off": None,
}


def _point(model: bytes, mode: str, pool: str) -> Point:
    """The point at 1 MiB, or at the smallest pool: what the schedule at 1 KiB needs."""
    prepared = prepared_model(model, "ethos-u55-256")

    def at(size: int) -> Point:
        memory = system_memory("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", size)
        return prepared.scheduler.schedule_point(memory, _CASCADER[mode])

    return at(1 << 20 if pool == "1MiB" else at(1024).schedule.sram_bytes)


@pytest.mark.parametrize("pool", ["smallest", "1MiB"])
@pytest.mark.parametrize("mode", list(_CASCADER))
@pytest.mark.parametrize("make", [_sandwich, _skip_around_host, _split_around_host])
def test_each_function_of_one_schedule_runs_striped_and_equals_the_reference(
    make, mode: str, pool: str
) -> None:
    """The schedule of several NPU functions runs function by function, host ops between
    them on litert: bit for bit what the unscheduled reference gives."""
    model = make()
    point = _point(model, mode, pool)
    assert point.fits and (point.cascade is not None) == (mode != "off")
    hybrid = HybridModel(model, point.schedule.network.functions)
    executor = StripedExecutor(point.schedule)
    rng = np.random.default_rng(5)
    for _ in range(2):
        inputs = random_inputs(model, rng)
        scheduled = hybrid.run(inputs, lambda i, _, values: executor.run_function(i, values))
        assert _max_diff(scheduled, hybrid.run(inputs)) == 0
    parts = sum(not p.in_line for p in point.schedule.network.graph.parts)
    assert executor.stripes_run >= 2 * parts
    if mode in ("striping", "multi-dimensional"):
        assert executor.stripes_run > 2 * parts  # something was striped


def test_functions_run_in_any_order_each_on_its_own_steps() -> None:
    """The second function run first, then the first, then the second again: each run gives
    what the reference gives, whatever ran before, and runs only its own stripes."""
    model = _skip_around_host()
    point = _point(model, "striping", "smallest")
    schedule = point.schedule
    hybrid = HybridModel(model, schedule.network.functions)
    given: dict[int, list[np.ndarray]] = {}
    returned: dict[int, list[np.ndarray]] = {}

    def record(index, function, values):
        given[index] = values
        returned[index] = run_function(function, values)
        return returned[index]

    hybrid.run(random_inputs(model, np.random.default_rng(1)), record)
    executor = StripedExecutor(schedule)
    assert _max_diff(executor.run_function(1, given[1]), returned[1]) == 0
    functions = [schedule.network.function_of[s.part] for s in schedule.steps
                 if isinstance(s, Stripe)]  # fmt: skip
    assert executor.stripes_run == functions.count(1) > 0
    assert _max_diff(executor.run_function(0, given[0]), returned[0]) == 0
    assert _max_diff(executor.run_function(1, given[1]), returned[1]) == 0
    assert executor.stripes_run == len(functions) + functions.count(1)


def test_run_asks_for_one_function_and_run_function_for_its_inputs() -> None:
    executor = StripedExecutor(_point(_sandwich(), "striping", "1MiB").schedule)
    with pytest.raises(StripeError, match="2 NPU functions: run each with run_function"):
        executor.run([np.zeros((1, 8, 8, 8), np.int8)])
    with pytest.raises(StripeError, match="2 inputs given, 1 expected"):
        executor.run_function(1, [np.zeros((1, 8, 8, 16), np.int8)] * 2)


@pytest.mark.parametrize(
    "case",
    # branches: an average pool keeps its input's quantisation, so one litert run decides
    # which of the two tensors the function returns
    ["ADD", "SPLIT-height-4", "FULLY_CONNECTED-4d-input", "chain", "branches"],
)
def test_fully_npu_models_are_one_function_and_no_host_step(case: str) -> None:
    model = CATALOGUE[case]().build()
    hybrid = HybridModel.from_model(model)
    assert [type(s) for s in hybrid.steps] == [NpuStep]
    inputs = random_inputs(model, np.random.default_rng(0))
    assert _max_diff(run_model(model, inputs), litert_outputs(model, inputs)) <= 1


def test_a_model_entirely_on_the_host_runs_on_litert_alone() -> None:
    model = _host_only()
    hybrid = HybridModel.from_model(model)
    assert hybrid.functions == () and hybrid.host_ops == ("RESIZE_NEAREST_NEIGHBOR",)
    inputs = random_inputs(model, np.random.default_rng(0))
    assert _max_diff(hybrid(inputs), litert_outputs(model, inputs)) == 0


def test_wrong_input_count_is_refused() -> None:
    with pytest.raises(ReferenceError, match="1 inputs given, 2 expected"):
        HybridModel.from_model(CATALOGUE["ADD"]().build()).run([np.zeros((1, 8, 8, 16), "int8")])


def test_functions_of_another_model_are_refused() -> None:
    with pytest.raises(ReferenceError, match="no TFLite tensor"):
        HybridModel(_sandwich(), model_npu_functions(CATALOGUE["chain"]().build()))
