"""Swish (LOGISTIC then MUL by the same tensor, as TFLite writes EfficientNet's) folded into
one table lookup: the pair's bytes exactly, in one pass over the tensor."""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from functools import cache

import numpy as np
from sessions import session

from cascader.artifact.run import firmware_runner
from cascader.estimate import PointConfig
from cascader.frontend.legalize import legalize, remove_identities
from cascader.frontend.partition import partition_for_ethosu
from cascader.frontend.tflite_import import import_tflite
from cascader.ir.npu_ops import BinaryElementwise, UnaryElementwise
from cascader.reference.elementwise import binary_elementwise, unary_elementwise
from cascader.testing.tflite_builder import ModelBuilder
from cascader.verify.point_check import verify_point

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")


@cache
def _model() -> bytes:
    """Two swishes (the MUL's operands in both orders) and a sigmoid gate that is not one."""
    b = ModelBuilder(3, 4, name="swish")
    x = b.input((1, 16, 16, 8))
    y = b.conv2d(x, 16, kernel=3, activation="NONE")
    y = b.mul(y, b.logistic(y))
    z = b.depthwise_conv2d(y, kernel=3, activation="NONE")
    z = b.mul(b.logistic(z), z)
    gate = b.logistic(b.conv2d(z, 16, kernel=1, activation="NONE"))
    b.output(b.mul(z, gate))
    return b.build()


def _luts(ops) -> list[str]:
    return [op.activation.function for op in ops if isinstance(op, UnaryElementwise)]


def test_each_swish_becomes_one_lookup_and_a_gate_stays() -> None:
    ops = session(_model(), *U55).prepared.network.functions[0].ops
    assert _luts(ops) == ["swish", "swish", "sigmoid"]
    assert [op.operator for op in ops if isinstance(op, BinaryElementwise)] == ["MUL"]


def test_the_table_is_the_pair_of_ops() -> None:
    """Every int8 input through the unfolded sigmoid and MUL gives the folded table."""
    unfolded = remove_identities(legalize(partition_for_ethosu(import_tflite(_model())))[0])
    folded = {op.name: op for op in session(_model(), *U55).prepared.network.functions[0].ops}
    sigmoids = {op.ofm.name: op for op in unfolded.ops if _luts([op]) == ["sigmoid"]}
    checked = 0
    for mul in unfolded.ops:
        if not isinstance(mul, BinaryElementwise) or mul.name not in folded:
            continue
        if _luts([folded[mul.name]]) != ["swish"]:
            continue
        x = np.arange(-128, 128, dtype=np.int64)
        sigmoid = sigmoids[mul.ifm2.name if mul.ifm2.name in sigmoids else mul.ifm.name]
        row = (1, 1, 1, 256)
        s = unary_elementwise(_flat(sigmoid), x.reshape(row)).astype(np.int64)
        a, b = (x, s) if mul.ifm.name == sigmoid.ifm.name else (s, x)
        want = binary_elementwise(_flat(mul), a.reshape(row), b.reshape(row))
        assert folded[mul.name].activation.lut == tuple(int(v) for v in want.reshape(-1))
        checked += 1
    assert checked == 2


def _flat(op):
    """The op over one row of 256 elements."""
    slots = ("ifm", "ifm2", "ofm") if isinstance(op, BinaryElementwise) else ("ifm", "ofm")
    return replace(op, **{s: replace(getattr(op, s), shape=(1, 1, 1, 256)) for s in slots})


def test_folded_swish_matches_litert_and_runs_bit_for_bit() -> None:
    found = session(_model(), *U55)
    config = PointConfig(256 * 1024, None)
    with contextlib.redirect_stdout(io.StringIO()):
        result = verify_point(found, config, compiled=firmware_runner(found, config))
    assert result.findings == ()
    diff = result.max_abs_diff()
    assert diff["schedule_vs_reference"] == diff["command_stream_vs_reference"] == 0
    assert diff["reference_vs_litert"] <= 1
