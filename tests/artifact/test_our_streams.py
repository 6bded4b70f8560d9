"""Our command streams compute the network: `<model>_dse.tflite`, run on the simulator (proven
on Vela's own output, `tests/simulator`), gives the integer reference's values bit for bit,
with no uninitialised read, out-of-region access or hazard, for builder networks of every
kind of NPU op and shared models, striped and not, on Ethos-U55 and Ethos-U65; `dse simulate`
runs ours and Vela's files against LiteRT and refuses bad input in one line."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ethosu.vela.api import NpuDmaOperation
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0
from sessions import session
from test_firmware_tflite import three_functions, two_functions

from cascader.artifact.run import firmware_runner
from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.ethosu.codegen import generate
from cascader.ir.schedule import Copy
from cascader.testing.architectures import unet
from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir
from cascader.verify.point_check import verify_point
from dse.cli import main

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
MODES = {
    "off": None,
    "flat": CascaderOptions(enable_striping=False),
    "striped": CascaderOptions(enable_striping=True),
    "md": CascaderOptions(enable_striping=True, enable_multi_dimensional_striping=True),
}
NETWORKS = ["chain", "residual", "concat_skip", "mobilenet_like", "SOFTMAX", "AVERAGE_POOL_2D",
            "MEAN", "TRANSPOSE_CONV", "RESIZE_BILINEAR", "PAD", "FULLY_CONNECTED-1x1-4d-input",
            "LOGISTIC", "STRIDED_SLICE"]  # fmt: skip
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def _model(name: str) -> bytes:
    built = {"two_functions": two_functions, "three_functions": three_functions}
    if name in built:
        return built[name]()
    return CATALOGUE[name]().build()


def _check(model: bytes, system: tuple, pool: int, options: CascaderOptions | None) -> None:
    found = session(model, *system)
    config = PointConfig(pool, options)
    with contextlib.redirect_stdout(io.StringIO()):
        result = verify_point(found, config, compiled=firmware_runner(found, config))
    assert result.findings == ()
    assert result.max_abs_diff()["command_stream_vs_reference"] == 0
    assert result.max_abs_diff()["schedule_vs_reference"] == 0


@pytest.mark.parametrize("mode", ["off", "striped", "md"])
@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("name", [*NETWORKS, "two_functions", "three_functions"])
def test_our_streams_are_the_reference(name: str, system: tuple, mode: str) -> None:
    _check(_model(name), system, 1 << 20, MODES[mode])


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
def test_our_smallest_schedules_are_the_reference(system: tuple) -> None:
    """The smallest striped schedules: rolling buffers, windows copied stripe by stripe."""
    model = CATALOGUE["mobilenet_like"]().build()
    options = MODES["md"]
    found = session(model, *system)
    floor = found.schedule(PointConfig(1024, options)).schedule.sram_bytes
    _check(model, system, floor, options)


@pytest.mark.parametrize("name", ["kws_dscnn", "ic_resnet8"])
def test_shared_models_streams_are_the_reference(name: str) -> None:
    shared = shared_dir()
    if shared is None:
        pytest.skip("../shared is not here")
    model = (shared / "models" / f"{name}.tflite").read_bytes()
    _check(model, U55, 256 << 10, MODES["striped"])
    _check(model, U65, 256 << 10, MODES["md"])


def _simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["compile", "--model", str(EXAMPLE), "--sram", "128KiB", "-o", str(out)]) == 0
    return out / "mobilenet_like_96_dse.tflite"


def test_dse_simulate_runs_our_file(capsys: pytest.CaptureFixture[str], compiled: Path) -> None:
    code, out, _ = _simulate(capsys, "--model", str(compiled), "--reference", str(EXAMPLE),
                             "--samples", "2", "--json")  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert data["max_abs_diff"]["simulated_vs_litert"] <= 1 and data["findings"] == []
    assert data["ethos_u_ops"] == 1 and data["npu_ops"] > 0 and data["samples"] == 2


def test_dse_simulate_checks_a_unet_against_litert_reference_kernels(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Our U-Net file (issue 20) on the simulator equals LiteRT's reference kernels, which
    `dse simulate` compares a file of only ethos-u operators with: the built-in ones round
    TRANSPOSE_CONV's negative ties up, 5 steps at this U-Net's output (`tests/dse`)."""
    model = tmp_path / "unet_32.tflite"
    model.write_bytes(unet(size=32).build())
    build = tmp_path / "build"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["compile", "--model", str(model), "--sram", "1MiB", "-o", str(build)]) == 0
    code, out, err = _simulate(capsys, "--model", str(build / "unet_32_dse.tflite"),
                               "--reference", str(model), "--json")  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["litert_kernels"] == "reference" and data["findings"] == []
    assert data["max_abs_diff"]["simulated_vs_litert"] == 0


def test_dse_verify_reports_the_command_streams(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--model", str(EXAMPLE), "--sram", "128KiB", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["max_abs_diff"]["command_stream_vs_reference"] == 0 and data["findings"] == []


def _truncated_stream(source: Path, target: Path) -> None:
    import flatbuffers

    tree = schema.ModelT.InitFromPackedBuf(source.read_bytes(), 0)
    sub = tree.subgraphs[0]
    stream = sub.tensors[sub.operators[0].inputs[0]]
    buffer = tree.buffers[stream.buffer]
    buffer.data = buffer.data[: len(buffer.data) // 2]
    stream.shape = [len(buffer.data)]
    builder = flatbuffers.Builder(1024)
    builder.Finish(tree.Pack(builder), file_identifier=b"TFL3")
    target.write_bytes(bytes(builder.Output()))


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("not a tflite", "not a TFLite"),
        ("no ethos-u op", "no ethos-u operator"),
        ("another model", "is not a compiled form of"),
        ("truncated stream", "command stream is damaged"),
    ],
)
def test_dse_simulate_refuses_bad_input_in_one_line(
    case: str, message: str, capsys: pytest.CaptureFixture[str], compiled: Path, tmp_path: Path
) -> None:
    model, reference = compiled, EXAMPLE
    if case == "not a tflite":
        model = tmp_path / "x.tflite"
        model.write_bytes(b"not a flatbuffer at all" * 8)
    elif case == "no ethos-u op":
        model = EXAMPLE
    elif case == "another model":
        reference = tmp_path / "other.tflite"
        reference.write_bytes(two_functions())
    else:
        model = tmp_path / "cut.tflite"
        _truncated_stream(compiled, model)
    code, _, err = _simulate(capsys, "--model", str(model), "--reference", str(reference))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize(
    ("name", "mode"), [("MAX_POOL_2D-3x3-stride2-same", "striped"), ("mobilenet_like", "md")]
)
def test_u65_gathers_a_window_in_1d_dmas_and_the_estimate_charges_each(
    name: str, mode: str
) -> None:
    """On Ethos-U65 a feature-map window in DRAM comes into SRAM as 1-D DMAs, a line each
    where its lines are apart in the source: Arm's own compiler (regor) sets a 2-D/3-D mode
    only on a DMA's destination, never on a strided source, so our streams do not either. The
    estimate charges every one of those DMAs, and the stream runs bit-exact."""
    model = CATALOGUE[name]().build()
    options = replace(MODES[mode], always_copy_size=1 << 20)
    found = session(model, *U65)
    schedule = found.schedule(PointConfig(64 << 10, options)).schedule
    copies = [s for s in schedule.steps if isinstance(s, Copy) and s.what == "feature_map"]
    assert copies
    compiled = generate(schedule, U65[0])
    dmas = [op for f in compiled.functions for op in f.operations]
    windows = [d for d in dmas if isinstance(d, NpuDmaOperation) and d.src.region == 1]
    assert len(windows) > len(copies)  # some window is gathered line by line
    for stream in compiled.functions:
        words = np.frombuffer(stream.command_stream, dtype="<u4")
        regions = [int(w >> 16) for w in words if w & 0xFFFF == cmd0.NPU_SET_DMA0_SRC_REGION.value]
        assert all(param >> 9 & 3 == 0 for param in regions)  # no strided source
    _check(model, U65, 64 << 10, options)
