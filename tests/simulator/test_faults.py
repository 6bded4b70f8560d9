"""Faults injected into Vela's own command streams are caught: as a wrong output, a finding
or an error. Each starts from a stream the simulator runs cleanly and bit-exactly."""

from __future__ import annotations

import pytest
from sim_support import edit_payload, ethos_u_payload, litert, max_abs_diff, random_inputs

from cascader.simulator import FindingKind, VelaModel, run_vela_tflite
from cascader.testing.networks import CATALOGUE


@pytest.fixture(scope="module")
def legacy_conv(vela_compile):
    """CONV_2D by Vela's legacy core: weights DMA'd to SRAM, then a DMA_WAIT, then the conv."""
    model = CATALOGUE["CONV_2D"]().build()
    parsed = VelaModel.parse(vela_compile(model, "ethos-u55-256", True))
    inputs = random_inputs(parsed)
    expected = litert(model, inputs)
    clean = run_vela_tflite(parsed, inputs)
    assert clean.findings == [] and max_abs_diff(clean.outputs, expected) == 0
    return parsed, inputs, expected


def _run(case, name: str, change: str, amount: int = 0) -> tuple[int, set[FindingKind]]:
    """(max |output - LiteRT|, kinds of finding) with the first `name` command changed."""
    parsed, inputs, expected = case
    index, payload = ethos_u_payload(parsed)
    faulty = edit_payload(payload, name, change, amount)
    result = run_vela_tflite(parsed, inputs, command_streams={index: faulty})
    return max_abs_diff(result.outputs, expected), {f.kind for f in result.findings}


def test_ifm_base_plus_16(legacy_conv) -> None:
    diff, kinds = _run(legacy_conv, "NPU_SET_IFM_BASE0", "add", 16)
    assert diff > 1
    assert FindingKind.UNINITIALISED_READ in kinds  # the read runs past the input


def test_weight_stream_16_bytes_short(legacy_conv) -> None:
    diff, kinds = _run(legacy_conv, "NPU_SET_WEIGHT_LENGTH", "add", -16)
    assert FindingKind.BAD_WEIGHTS in kinds
    assert diff > 1


def test_dropped_dma(legacy_conv) -> None:
    diff, kinds = _run(legacy_conv, "NPU_OP_DMA_START", "drop")
    assert FindingKind.UNINITIALISED_READ in kinds  # the weights never reached SRAM
    assert diff > 1


def test_wrong_ofm_stride(legacy_conv) -> None:
    diff, kinds = _run(legacy_conv, "NPU_SET_OFM_STRIDE_Y", "add", 16)
    assert diff > 1
    assert FindingKind.UNINITIALISED_READ in kinds  # rows of the output left unwritten


def test_missing_dma_wait(legacy_conv) -> None:
    """The copy and the operation reading it would overlap on the hardware."""
    _, kinds = _run(legacy_conv, "NPU_OP_DMA_WAIT", "drop")
    assert FindingKind.HAZARD in kinds


def test_dropped_dma_in_a_shared_model(vela_compile, shared_models) -> None:
    model = (shared_models / "kws_dscnn.tflite").read_bytes()
    parsed = VelaModel.parse(vela_compile(model, "ethos-u55-256"))
    inputs = random_inputs(parsed)
    index, payload = ethos_u_payload(parsed)
    for nth in (0, 3):
        faulty = edit_payload(payload, "NPU_OP_DMA_START", "drop", nth=nth)
        result = run_vela_tflite(parsed, inputs, command_streams={index: faulty})
        assert FindingKind.UNINITIALISED_READ in {f.kind for f in result.findings}


def test_missing_wait_before_a_lut_lookup(vela_compile) -> None:
    """The LUT is DMA'd into SHRAM; looking it up before the DMA completes is a hazard."""
    model = CATALOGUE["LOGISTIC"]().build()
    parsed = VelaModel.parse(vela_compile(model, "ethos-u55-256"))
    index, payload = ethos_u_payload(parsed)
    faulty = edit_payload(payload, "NPU_OP_DMA_WAIT", "drop")
    result = run_vela_tflite(parsed, random_inputs(parsed), command_streams={index: faulty})
    assert [f.kind for f in result.findings] == [FindingKind.HAZARD]
    assert "LUT reads" in str(result.findings[0])
