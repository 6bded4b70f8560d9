"""A proof that can fail: our command streams equal the reference on outputs that vary with
the input (the builder architectures and the shared models, cut where their outputs vary when
the whole network's output is the same for every input), over 8 samples; and a flipped byte in
the weights, the scale-bias or the command stream changes what the file computes."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from proofs import proven, small_options
from sessions import session
from test_firmware_tflite import SHARED, U55, U65

from cascader.artifact.firmware_tflite import model_for_firmware
from cascader.artifact.run import LiteRTHostOps
from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.simulator import VelaModel, run_vela_tflite
from cascader.simulator.commands import decode_commands
from cascader.simulator.payload import parse_payload, replace_stream
from cascader.testing import architectures as arch
from cascader.testing.shared import shared_dir
from cascader.verify.cut import cut_where_varying
from cascader.verify.litert import MIN_DISTINCT, litert_outputs, random_inputs
from cascader.verify.reference_kernels import (
    reference_kernel_outputs,
    refused_softmaxes,
    run_reference_kernels,
)
from dse.cli import main

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

SAMPLES = 8
CONFIG = PointConfig(1 << 20, CascaderOptions(enable_striping=True))
BUILDER: dict[str, Callable[[], bytes]] = {
    "mobilenet_v1": lambda: arch.mobilenet_v1(size=64, alpha=0.25).build(),
    "efficientnet_b0_like": lambda: arch.efficientnet_b0_like(size=32).build(),
    "resnet50_like": lambda: arch.resnet50_like(size=32).build(),
    "ds_cnn": lambda: arch.ds_cnn().build(),
    "unet": lambda: arch.unet(size=32).build(),
    "mobilenet_v2_035": lambda: arch.mobilenet_v2(size=32, classes=10).build(),
    "person_detection": lambda: arch.person_detection(size=48).build(),
}


def _model(name: str) -> bytes:
    if name in BUILDER:
        return BUILDER[name]()
    shared = shared_dir()
    if shared is None:
        pytest.skip("../shared is not here")
    return (shared / "models" / f"{name}.tflite").read_bytes()


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("name", [*BUILDER, *SHARED])
def test_streams_equal_the_reference_where_outputs_vary(name: str, system: tuple) -> None:
    cut, _ = cut_where_varying(_model(name), SAMPLES)
    proven(session(cut, *system), CONFIG, SAMPLES)


def _flip_constants(compiled, at: int):
    constants = bytearray(compiled.constants)
    constants[at] ^= 0x40
    return dataclasses.replace(compiled, constants=bytes(constants))


def _constant_offsets(compiled, kind: str) -> list[tuple[int, int]]:
    """(offset, length) in the constants of each op's weight or scale-bias stream (`kind`
    "weights" or "biases"), following a copy into SRAM back to where it came from."""
    found = []
    copies: list = []
    for op in compiled.functions[-1].operations:
        if type(op).__name__ == "NpuDmaOperation":
            copies.append(op)
            continue
        for piece in getattr(op, kind, None) or []:
            if piece.region == 0:
                found.append((piece.address, piece.length))
                continue
            for dma in reversed(copies):
                start = dma.dest.address
                inside = start <= piece.address < start + dma.dest.length
                if dma.dest.region == piece.region and inside:
                    found.append((dma.src.address + piece.address - start, piece.length))
                    break
    return found


def _flip_ofm_zero_point(compiled):
    """The last OFM zero point of the last function's command stream, one bit changed."""
    stream = compiled.functions[-1]
    words = [int(w) for w in parse_payload(stream.driver_payload).streams[0]]
    commands, _ = decode_commands(np.array(words, np.uint32))
    last = [c for c in commands if c.name == "NPU_SET_OFM_ZERO_POINT"][-1]
    at = last.offset // 4
    words[at] ^= 1 << 16  # the command's 16-bit parameter
    flipped = dataclasses.replace(
        stream, driver_payload=replace_stream(stream.driver_payload, words)
    )
    return dataclasses.replace(compiled, functions=[*compiled.functions[:-1], flipped])


def _flip_weights(compiled):
    """A byte in the middle of the last op's weight stream."""
    offset, length = _constant_offsets(compiled, "weights")[-1]
    return _flip_constants(compiled, offset + length // 2)


def _flip_scale(compiled):
    """The top byte of the last op's first channel scale (a scale-bias entry is a 40-bit
    bias, a 32-bit scale and a shift: bytes 5-8 the scale)."""
    offset, _ = _constant_offsets(compiled, "biases")[-1]
    return _flip_constants(compiled, offset + 8)


FLIPS = {
    "weights": _flip_weights,
    "scale-bias": _flip_scale,
    "command-stream": _flip_ofm_zero_point,
}


# The two largest on U55 only: U65 runs the same kinds of cascade on the others.
FLOORS = [(name, system) for name in BUILDER for system in (U55, U65)
          if system is U55 or name not in ("resnet50_like", "efficientnet_b0_like")]  # fmt: skip


@pytest.mark.parametrize(("name", "system"), FLOORS, ids=[f"{n}-{s[0][6:9]}" for n, s in FLOORS])
def test_each_architecture_s_smallest_schedule_is_bit_exact(name: str, system: tuple) -> None:
    """The kind of schedule a front's floor is (the `vela` model's smallest: 2-D tiles,
    weights in place, outputs laid over the inputs they consume where the allocation finds
    such pairs), at a pool under all of them, where outputs vary."""
    cut, _ = cut_where_varying(_model(name), SAMPLES)
    config = PointConfig(4096, small_options("vela", two_d=True), 1 << 20)
    proven(session(cut, *system), config, SAMPLES)


@pytest.mark.parametrize("flip", list(FLIPS))
@pytest.mark.parametrize("name", ["mobilenet_v1", "ds_cnn", "kws_dscnn"])
def test_a_flipped_byte_is_caught(name: str, flip: str) -> None:
    cut, _ = cut_where_varying(_model(name), SAMPLES)
    found = session(cut, *U55)
    _, point, compiled = found.compile(CONFIG)
    rng = np.random.default_rng(0)
    drawn = [random_inputs(cut, rng) for _ in range(SAMPLES)]

    def outputs(compiled) -> tuple[list[np.ndarray], list[str]]:
        data = model_for_firmware(cut, compiled, point.schedule)
        parsed, host = VelaModel.parse(data), LiteRTHostOps(data)
        runs = [run_vela_tflite(parsed, inputs, host=host) for inputs in drawn]
        return [o for r in runs for o in r.outputs], [str(f) for r in runs for f in r.findings]

    clean, clean_findings = outputs(compiled)
    assert clean_findings == []
    faulty, findings = outputs(FLIPS[flip](compiled))
    changed = any(not np.array_equal(a, b) for a, b in zip(clean, faulty, strict=True))
    assert changed or findings, "the flipped byte changed nothing"


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A MobileNetV1 whose softmax is the same for every input, and its `dse compile` build."""
    folder = tmp_path_factory.mktemp("classifier")
    model = folder / "mobilenet_v1.tflite"
    model.write_bytes(BUILDER["mobilenet_v1"]())
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            main(["compile", "--model", str(model), "--sram", "1MiB", "-o", str(folder / "b")]) == 0
        )
    return model, folder / "b" / "mobilenet_v1_dse.tflite"


def test_simulate_warns_of_an_output_that_never_varies(
    classifier: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model, built = classifier
    code = main(["simulate", "--model", str(built), "--reference", str(model), "--json"])
    captured = capsys.readouterr()
    assert code == 0
    data = json.loads(captured.out)
    assert data["samples"] == SAMPLES  # the default
    (output,) = data["outputs"]
    assert output["distinct"] < MIN_DISTINCT
    (line,) = captured.err.strip().splitlines()
    assert "warning: output 0 takes" in line and "dse cut" in line


def test_dse_cut_then_verify_compares_outputs_that_vary(
    classifier: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model, _ = classifier
    cut = tmp_path / "cut.tflite"
    assert main(["cut", "--model", str(model), "-o", str(cut)]) == 0
    assert "fully_connected" in capsys.readouterr().out
    code = main(["verify", "--model", str(cut), "--sram", "1MiB", "--json"])
    captured = capsys.readouterr()
    assert code == 0 and captured.err == ""
    (output,) = json.loads(captured.out)["outputs"]
    streamed = output["command_stream_vs_reference"]
    assert streamed["max_abs_diff"] == 0 and streamed["distinct"] >= MIN_DISTINCT


def test_dse_cut_refuses_a_file_that_is_no_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"no flatbuffer" * 10)
    assert main(["cut", "--model", str(bad), "-o", str(tmp_path / "c.tflite")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "c.tflite").exists()


@pytest.mark.parametrize("name", ["vww_mobilenet_v1_025", "mobilenet_v2_100_224"])
def test_reference_kernels_run_a_softmax_they_refuse_to_prepare(name: str) -> None:
    """These classifiers' logits have so small a scale that LiteRT's reference SOFTMAX aborts
    while preparing; the model runs operator by operator, that SOFTMAX in float64."""
    model = _model(name)
    tree = schema.ModelT.InitFromPackedBuf(model, 0)
    (refused,) = refused_softmaxes(tree)
    assert refused == len(tree.subgraphs[0].operators) - 1
    rng = np.random.default_rng(0)
    drawn = [random_inputs(model, rng) for _ in range(2)]
    found = reference_kernel_outputs(model, drawn)
    assert found is not None
    for outputs, inputs in zip(found, drawn, strict=True):
        (theirs,) = litert_outputs(model, inputs, "builtin")
        assert np.abs(outputs[0].astype(int) - theirs.astype(int)).max() <= 1


def test_reference_kernels_run_a_softmax_that_would_abort_running() -> None:
    """A 1000-class softmax over logits near one another aborts the reference kernel while it
    runs: the whole model fails in its child, then runs operator by operator."""
    model = BUILDER["efficientnet_b0_like"]()
    rng = np.random.default_rng(0)
    drawn = [random_inputs(model, rng) for _ in range(2)]
    assert run_reference_kernels(model, drawn, by_operator=False) is None
    found = reference_kernel_outputs(model, drawn)
    assert found is not None
    for outputs, inputs in zip(found, drawn, strict=True):
        (theirs,) = litert_outputs(model, inputs, "builtin")
        assert np.abs(outputs[0].astype(int) - theirs.astype(int)).max() <= 1


def test_simulate_compares_a_whole_classifier_with_the_reference_kernels(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shared = shared_dir()
    if shared is None:
        pytest.skip("../shared is not here")
    model = shared / "models" / "vww_mobilenet_v1_025.tflite"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["compile", "--model", str(model), "--sram", "1MiB", "-o", str(tmp_path)]) == 0
    built = tmp_path / "vww_mobilenet_v1_025_dse.tflite"
    code = main(["simulate", "--model", str(built), "--reference", str(model), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["litert_kernels"] == "reference" and data["litert_tolerance"] == 1
    assert data["max_abs_diff"]["simulated_vs_litert"] == 0
