"""A concatenation along the channels is one part with one input per concatenated tensor
(`Concatenation`): a stripe of its rows reads the same rows of every input, so a U-Net's
decoder runs in row stripes through its concatenations instead of holding each whole, and
through its transposed convolutions, which run in row stripes too. The schedules are proven
on the simulator: command streams equal the reference over samples whose outputs vary, in
rows and in 2-D tiles, under both cost models."""

from __future__ import annotations

import contextlib
import io
from functools import cache

import numpy as np
import pytest
from proofs import proven, small_options
from sessions import session

from cascader.core.tensor_config import TensorConfigState
from cascader.estimate import PointConfig
from cascader.ir.boxes import Box
from cascader.ir.npu_ops import Concatenation, Conv2D
from cascader.ir.schedule import Stripe
from cascader.testing.architectures import unet
from cascader.testing.tflite_builder import ModelBuilder
from cascader.verify.point_check import Verification

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
SAMPLES = 8
POOL = 4096  # below every schedule of the network: each kind runs its smallest


@cache
def _decoder_net() -> bytes:
    """One U-Net level: a skip, a pooled branch brought back up by a stride-2 transpose
    convolution, both concatenated and convolved; the concatenation is the largest tensor."""
    b = ModelBuilder(0, 2, name="decoder")
    skip = b.conv2d(b.input((1, 16, 16, 4)), 16, kernel=3, activation="RELU")
    x = b.conv2d(b.max_pool2d(skip, pool=2), 32, kernel=3, activation="RELU")
    x = b.concatenation([b.transpose_conv(x, 16, kernel=3, stride=2), skip], axis=-1)
    x = b.conv2d(x, 16, kernel=3, activation="RELU")
    b.output(b.conv2d(x, 8, kernel=3, stride=2, activation="RELU"))
    return b.build()


def _concatenations(found) -> list[int]:
    ops = found.prepared.network.ops
    return [pid for pid, op in enumerate(ops) if isinstance(op, Concatenation)]


def _cascaded_concatenations(found, config: PointConfig) -> int:
    """How many concatenations the chosen proposal runs in stripes: interior to a plan of
    several parts, and held in the schedule by no buffer of the whole tensor."""
    with contextlib.redirect_stdout(io.StringIO()):
        point = found.schedule(config)
    graph = found.prepared.network.graph
    concatenations = {graph.parts[pid].output.id for pid in _concatenations(found)}
    striped = set()
    for plan in point.cascade.chosen.plans:
        if plan.part_group.bit_count() < 2:
            continue
        striped |= {
            c.tensor.id
            for c in plan.tensor_configs
            if c.state == TensorConfigState.INTERIOR and c.tensor.id in concatenations
        }
    whole = {b.tensor for b in point.schedule.buffers if b.kind == "tensor"}
    assert not striped & whole
    return len(striped)


def _transposed_row_stripes(found, config: PointConfig) -> list[Box]:
    """The output stripes the schedule runs the transposed convolutions in."""
    with contextlib.redirect_stdout(io.StringIO()):
        point = found.schedule(config)
    ops = point.schedule.network.ops
    return [
        s.ofm
        for s in point.schedule.steps
        if isinstance(s, Stripe)
        and isinstance(ops[s.part], Conv2D)
        and ops[s.part].upscale != "NONE"
    ]


def _within_an_lsb_of_litert(checked: Verification) -> None:
    for out in checked.outputs:
        assert out.reference_vs_litert.max_abs_diff <= checked.litert_tolerance <= 1


def test_a_unet_concatenation_is_one_part_reading_rows_of_each_input() -> None:
    found = session(unet(size=32).build(), *U55)
    net = found.prepared.network
    pids = _concatenations(found)
    assert len(pids) == 4  # one per decoder level, both inputs copied by one part
    for pid in pids:
        part, op = net.graph.parts[pid], net.ops[pid]
        assert len(part.inputs) == len(op.ifms) == 2
        n, _, w, c = op.ofm.shape
        for ifm, propagator in zip(op.ifms, part.propagators, strict=True):
            read = propagator.propagate_shapes(np.array([[n, 2, c // 16, w, 16]], float))
            assert tuple(read[0]) == (n, 2, ifm.shape[3] // 16, w, 16)  # same rows, its channels


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("cost_model", ["tvm", "vela"])
@pytest.mark.parametrize("two_d", [False, True], ids=["rows", "tiles"])
def test_concatenations_and_transposed_convolutions_inside_cascades_are_bit_exact(
    system: tuple, cost_model: str, two_d: bool
) -> None:
    found = session(_decoder_net(), *system)
    config = PointConfig(POOL, small_options(cost_model, two_d), proposal_region_bytes=1 << 20)
    assert _cascaded_concatenations(found, config) == 1
    stripes = _transposed_row_stripes(found, config)
    width = stripes[0].shape[2]
    assert len({s.start[1] for s in stripes}) > 1 and all(s.shape[2] == width for s in stripes)
    _within_an_lsb_of_litert(proven(found, config, SAMPLES))


@pytest.mark.slow
@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
def test_unet_decoders_cascade_through_their_concatenations(system: tuple) -> None:
    found = session(unet(size=32).build(), *system)
    config = PointConfig(16384, small_options("vela", False), proposal_region_bytes=1 << 22)
    assert _cascaded_concatenations(found, config) >= 2
    _within_an_lsb_of_litert(proven(found, config, SAMPLES))
