"""Timing Vela's C++ output with regor's own per-layer cycles (`regor_layers`): the layers
its queue table records cover every kernel command, so the timed cycles are regor's total
plus only what the stream's waits expose; a mapping that does not fit is refused and the
legacy formulas stay."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cascader.ethosu.vela_compiler import VelaCommand, VelaCompiled, VelaOptions, compile_model
from cascader.testing.networks import CATALOGUE, host_op
from cascader.testing.tflite_builder import ModelBuilder
from cascader.timing import LayerCycles, time_model

U65 = VelaOptions("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
# Issue 41's target, as for the legacy formulas on Vela's own output.
TOLERANCE = 0.10


def _two_operators() -> bytes:
    """Two NPU operators with a host operator between them: two command streams."""
    b = ModelBuilder(0, name="two ethos-u operators")
    x = b.conv2d(b.input((1, 8, 8, 16)), 16, kernel=3)
    b.output(b.conv2d(host_op(b, x), 32, kernel=1))
    return b.build()


# name -> (model, command streams, kernel commands regor does not record)
MODELS = {
    # regor records the first command of each transpose; its other slices follow it
    "depthwise-multiplier2": (CATALOGUE["DEPTHWISE_CONV_2D-multiplier2"]().build, 1, True),
    "two-operators": (_two_operators, 2, False),
}


@pytest.fixture(scope="module")
def compiled() -> dict[str, VelaCompiled]:
    return {name: compile_model(build(), U65) for name, (build, _, _) in MODELS.items()}


@pytest.mark.parametrize("name", MODELS)
def test_regor_layers_cover_every_kernel_command(compiled, name: str) -> None:
    found, (_, streams, unrecorded) = compiled[name], MODELS[name]
    timed = time_model(found.tflite, U65.system_config, U65.memory_mode,
                       layers=LayerCycles.of(found))  # fmt: skip
    assert (timed.per_op, timed.refusal) == ("regor", None)
    assert len({c.stream for c in found.commands}) == streams
    kernels = [j for j in timed.jobs if j.cost is not None]
    assert (len(kernels) > len(found.commands)) == unrecorded
    # every layer's cycles landed on its commands, and nothing else did
    assert timed.busy(True) == pytest.approx(found.total_cycles)
    assert abs(timed.cycles / found.total_cycles - 1) <= TOLERANCE


def _first_dropped(found: VelaCompiled) -> tuple[VelaCommand, ...]:
    return found.commands[1:]


def _on_a_dma(found: VelaCompiled) -> tuple[VelaCommand, ...]:
    """The second recorded command moved onto the first DMA after the first one."""
    jobs = time_model(found.tflite, U65.system_config, U65.memory_mode).jobs
    first, second = found.commands[:2]
    dma = next(j.offset for j in jobs if j.cost is None and j.offset > first.offset)
    return (first, second._replace(offset=dma), *found.commands[2:])


def _last_dropped(found: VelaCompiled) -> tuple[VelaCommand, ...]:
    """The last layer's commands would go to the layer before: its own cycles go nowhere."""
    return found.commands[:-1]


def _one_stream_more(found: VelaCompiled) -> tuple[VelaCommand, ...]:
    return (*found.commands, found.commands[-1]._replace(stream=1))


REFUSALS = {
    "before any command regor recorded": _first_dropped,
    "not a kernel operation": _on_a_dma,
    "cycles and no kernel command": _last_dropped,
    "in 2 command streams, the file has 1": _one_stream_more,
}


@pytest.mark.parametrize("reason", REFUSALS)
def test_a_mapping_that_does_not_fit_is_refused_and_legacy_stays(compiled, reason: str) -> None:
    found = compiled["depthwise-multiplier2"]
    layers = replace(LayerCycles.of(found), commands=REFUSALS[reason](found))
    timed = time_model(found.tflite, U65.system_config, U65.memory_mode, layers=layers)
    legacy = time_model(found.tflite, U65.system_config, U65.memory_mode)
    assert timed.per_op == "legacy"
    assert timed.refusal is not None and reason in timed.refusal
    assert timed.cycles == legacy.cycles
