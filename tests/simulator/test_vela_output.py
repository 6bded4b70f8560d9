"""The simulator on Vela 5.2's own output: builder models of several op kinds on Ethos-U55
and Ethos-U65 (Vela's C++ core, and its legacy core for some), and shared models, against
LiteRT's built-in kernels on the original model. Vela's streams must raise no finding."""

from __future__ import annotations

import numpy as np
import pytest
from sim_support import litert, max_abs_diff, random_inputs

from cascader.simulator import FindingKind, SimulationError, VelaModel, run_vela_tflite
from cascader.testing.networks import CATALOGUE, host_op
from cascader.testing.tflite_builder import ModelBuilder

# Bit-exact with LiteRT's built-in kernels on these (see benchmarks/simulator_vs_vela.md for
# the cases where those kernels round differently from TFLite's reference kernels).
EXACT = (
    "CONV_2D",
    "CONV_2D-stride2-valid-relu6",
    "DEPTHWISE_CONV_2D",
    "FULLY_CONNECTED",
    "MAX_POOL_2D-3x3-stride2-same",
    "AVERAGE_POOL_2D-3x3-stride1-same",
    "ADD-broadcast-channel",
    "SUB-broadcast-row",
    "MUL-broadcast-spatial",
    "MAXIMUM-broadcast",
    "CONCATENATION-width",
    "PAD",
    "RESIZE_BILINEAR",
    "LOGISTIC",
    "LEAKY_RELU",
    "SOFTMAX",
    "SPLIT",
)
WITHIN_ONE = ("TRANSPOSE_CONV", "MEAN", "chain")


def _check(vela_file: bytes, original: bytes, tolerance: int) -> None:
    model = VelaModel.parse(vela_file)
    inputs = random_inputs(model)
    result = run_vela_tflite(model, inputs)
    assert result.findings == []
    assert result.npu_ops > 0
    assert max_abs_diff(result.outputs, litert(original, inputs)) <= tolerance


@pytest.mark.parametrize("accelerator", ["ethos-u55-256", "ethos-u65-256"])
@pytest.mark.parametrize("name", EXACT)
def test_builder_models_bit_exact(vela_compile, name: str, accelerator: str) -> None:
    model = CATALOGUE[name]().build()
    _check(vela_compile(model, accelerator), model, 0)


@pytest.mark.parametrize("accelerator", ["ethos-u55-256", "ethos-u65-256"])
@pytest.mark.parametrize("name", WITHIN_ONE)
def test_builder_models_within_one(vela_compile, name: str, accelerator: str) -> None:
    model = CATALOGUE[name]().build()
    _check(vela_compile(model, accelerator), model, 1)


@pytest.mark.parametrize("name", ["CONV_2D", "DEPTHWISE_CONV_2D-dilation2", "SOFTMAX", "residual"])
def test_legacy_core(vela_compile, name: str) -> None:
    """The legacy core copies weights to SRAM by DMA and decomposes softmax differently."""
    model = CATALOGUE[name]().build()
    _check(vela_compile(model, "ethos-u55-256", True), model, 1 if name != "residual" else 2)


def test_shared_model_u55(vela_compile, shared_models) -> None:
    model = (shared_models / "ic_resnet8.tflite").read_bytes()
    _check(vela_compile(model, "ethos-u55-256"), model, 0)


def test_shared_model_u65_dedicated_sram(vela_compile, shared_models) -> None:
    """Dedicated_Sram: feature maps in the fast scratch (region 2), arena in DRAM."""
    model = (shared_models / "kws_dscnn.tflite").read_bytes()
    vela_file = vela_compile(
        model,
        "ethos-u65-256",
        True,
        "--system-config",
        "Ethos_U65_High_End",
        "--memory-mode",
        "Dedicated_Sram",
    )
    _check(vela_file, model, 0)


def test_deterministic(vela_compile) -> None:
    model = CATALOGUE["branches"]().build()
    parsed = VelaModel.parse(vela_compile(model, "ethos-u55-256"))
    inputs = random_inputs(parsed, seed=3)
    first, second = run_vela_tflite(parsed, inputs), run_vela_tflite(parsed, inputs)
    for a, b in zip(first.outputs, second.outputs, strict=True):
        np.testing.assert_array_equal(a, b)
    assert [str(f) for f in first.findings] == [str(f) for f in second.findings]
    assert first.runs[0].regions[1].data.tobytes() == second.runs[0].regions[1].data.tobytes()


def test_unwritten_output_is_reported(vela_compile) -> None:
    """Without the NPU operator, the output's bytes stay unwritten and say so."""
    model = CATALOGUE["CONV_2D"]().build()
    parsed = VelaModel.parse(vela_compile(model, "ethos-u55-256"))
    empty = bytes(4)  # NPU_OP_STOP only
    op = next(o for o in parsed.operators if o.kind == "ethos-u")
    result = run_vela_tflite(
        parsed, random_inputs(parsed), "ethos-u55-256", command_streams={op.index: empty}
    )
    assert [f.kind for f in result.findings] == [FindingKind.UNINITIALISED_READ]


def test_host_operator_between_npu_operators(vela_compile) -> None:
    """Vela leaves a 3x nearest resize on the CPU between two ethos-u operators; a host
    runner computes it and the values flow through the arena."""
    b = ModelBuilder(0, name="two functions")
    x = b.conv2d(b.input((1, 16, 16, 8)), 8, kernel=3)
    b.output(b.conv2d(host_op(b, x), 8, kernel=1))
    model = b.build()
    parsed = VelaModel.parse(vela_compile(model, "ethos-u55-256"))
    assert [op.kind for op in parsed.operators] == ["ethos-u", "RESIZE_NEAREST_NEIGHBOR", "ethos-u"]

    def host(_model, operator, inputs):  # nearest 3x: each element repeated 3x3
        assert operator.kind == "RESIZE_NEAREST_NEIGHBOR"
        return [np.repeat(np.repeat(inputs[0], 3, axis=1), 3, axis=2)]

    inputs = random_inputs(parsed)
    with pytest.raises(SimulationError, match="runs on the host"):
        run_vela_tflite(parsed, inputs)
    result = run_vela_tflite(parsed, inputs, host=host)
    assert result.findings == [] and result.ethos_u_ops == 2
    assert max_abs_diff(result.outputs, litert(model, inputs)) == 0
