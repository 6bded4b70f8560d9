"""`dse verify`: litert, the unscheduled reference and the stripe schedule on random inputs,
for the example network and builder models, cascader on/off and striping on/off; the errors a
user can act on exit 2 or 3 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sessions import session

from cascader.estimate import PointConfig
from cascader.testing.architectures import unet
from cascader.testing.networks import CATALOGUE, host_op
from cascader.testing.tflite_builder import ModelBuilder
from cascader.verify.point_check import verify_point
from cascader.verify.reference_kernels import reference_kernel_outputs
from cascader.verify.tolerance import litert_tolerance
from dse.cli import main
from dse.commands.verify import _problem

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def _verify(capsys: pytest.CaptureFixture[str], model: Path, *flags: str) -> tuple[int, str]:
    code = main(["verify", "--model", str(model), *flags])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "chain.tflite"
    path.write_bytes(CATALOGUE["chain"]().build())
    return path


def test_verify_json_is_the_design_object(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _verify(capsys, EXAMPLE, "--sram", "256KiB", "--json")
    assert code == 0, out
    data = json.loads(out)  # and no warning: the output varies (a constant one is warned of)
    assert data["samples"] == 8
    assert data["max_abs_diff"]["schedule_vs_reference"] == 0
    assert data["max_abs_diff"]["reference_vs_litert"] <= 1
    (output,) = data["outputs"]
    assert output["shape"] == [1, 10]
    assert output["schedule_vs_reference"]["elements"] == 80
    assert output["schedule_vs_reference"]["exact"] == 1.0
    assert data["schedule"]["cascaded"] and data["schedule"]["stripes"] > 67
    assert 0 < data["schedule"]["sram_used_bytes"] <= 256 * 1024


@pytest.mark.parametrize(
    "flags",
    [
        ["--sram", "64KiB", "--cost-model", "tvm"],
        ["--sram", "1MiB", "--no-striping"],
        ["--sram", "256KiB", "--multi-dimensional-striping"],
        ["--sram", "256KiB", "--no-cascade"],
        ["--sram", "64KiB"],  # the best of a sweep's seed kinds
    ],
)
def test_schedules_of_a_builder_network_equal_the_reference(
    capsys: pytest.CaptureFixture[str], chain: Path, flags: list[str]
) -> None:
    code, out = _verify(capsys, chain, *flags, "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["max_abs_diff"]["schedule_vs_reference"] == 0
    if len(flags) > 2:  # option flags pin the point
        assert data["schedule"]["cascaded"] == ("--no-cascade" not in flags)


def test_verify_prints_a_table(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    code, out = _verify(capsys, chain, "--sram", "256KiB")
    assert code == 0, out
    assert "schedule vs reference" in out and " schedule of " in out


def test_a_pool_nothing_fits_in_exits_3(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    code, out = _verify(capsys, chain, "--sram", "1KiB")
    assert code == 3
    assert "nothing fits in 1024 bytes; the smallest schedule needs" in out
    assert len(out.strip().splitlines()) == 1


EXACT = {"schedule_vs_reference": 0, "reference_vs_litert": 0, "command_stream_vs_reference": 0}


def _with_host_op(tmp_path: Path, host_first: bool) -> Path:
    """conv -> host op -> conv: two NPU functions; or
    the host op first, then two convs: one NPU function, and the host op's output is a second
    model output."""
    b = ModelBuilder(0, name="host op")
    if host_first:
        h = host_op(b, b.input((1, 8, 8, 4)))
        b.output(b.conv2d(b.conv2d(h, 8), 8), h)
    else:
        y = host_op(b, b.conv2d(b.input((1, 8, 8, 8)), 8))
        b.output(b.conv2d(y, 8))
    path = tmp_path / f"host_{int(host_first)}.tflite"
    path.write_bytes(b.build())
    return path


def test_a_model_with_a_host_op_verifies_through_the_schedule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _with_host_op(tmp_path, host_first=True)
    code, out = _verify(capsys, path, "--sram", "64KiB", "--multi-dimensional-striping", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert (data["npu_functions"], data["host_ops"]) == (1, ["RESIZE_NEAREST_NEIGHBOR"])
    assert data["schedule"]["stripes"] > 2
    assert data["max_abs_diff"] == {
        "schedule_vs_reference": 0,
        "reference_vs_litert": 0,
        "command_stream_vs_reference": 0,
    }
    assert [o["shape"] for o in data["outputs"]] == [[1, 8, 8, 8], [1, 8, 8, 4]]


@pytest.mark.parametrize(
    "flags",
    [
        ["--sram", "8KiB", "--multi-dimensional-striping"],
        ["--sram", "1MiB", "--no-striping"],
        ["--sram", "256KiB", "--no-cascade"],
    ],
)
def test_several_npu_functions_verify_through_the_schedule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str]
) -> None:
    """Two NPU functions around a host op: each runs its own steps of the one schedule."""
    path = _with_host_op(tmp_path, host_first=False)
    code, out = _verify(capsys, path, *flags, "--samples", "2", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert (data["npu_functions"], data["host_ops"]) == (2, ["RESIZE_NEAREST_NEIGHBOR"])
    assert data["max_abs_diff"] == {
        "schedule_vs_reference": 0,
        "reference_vs_litert": 0,
        "command_stream_vs_reference": 0,
    }
    assert data["schedule"]["stripes"] > 0
    assert data["schedule"]["cascaded"] == ("--no-cascade" not in flags)
    striped = "--multi-dimensional-striping" in flags
    # conv | host resize | max pool, conv: three NPU ops, one stripe each unless striped
    assert data["schedule"]["stripes"] > 3 if striped else data["schedule"]["stripes"] == 3
    assert data["outputs"][0]["schedule_vs_reference"]["elements"] == 2 * 8 * 8 * 8
    code, out = _verify(capsys, path, *flags)
    assert code == 0, out
    assert "2 NPU function(s); host ops on litert: RESIZE_NEAREST_NEIGHBOR" in out
    assert "not executed" not in out


def test_a_model_with_nothing_on_the_npu_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "host.tflite"
    b = ModelBuilder(4, name="host only")  # a 3x nearest resize: Vela keeps it on the CPU too
    b.output(b.resize_nearest_neighbor(b.input((1, 4, 4, 4)), (12, 12)))
    path.write_bytes(b.build())
    code, out = _verify(capsys, path, "--sram", "256KiB")
    assert code == 2
    assert "no operator runs on the NPU" in out
    assert len(out.strip().splitlines()) == 1


def test_an_exported_config_verifies_the_point_it_describes(
    capsys: pytest.CaptureFixture[str], chain: Path, tmp_path: Path
) -> None:
    out_dir, config = tmp_path / "study", tmp_path / "cfg.json"
    # Four trials: the first is the one seed, the cascader at its default options.
    assert main(["sweep", "--model", str(chain), "--trials", "4", "--out", str(out_dir),
                 "--producers", "cascader"]) == 0  # fmt: skip
    storage = f"sqlite:///{out_dir / 'study.db'}"
    assert main(["export", "--storage", storage, "--study", "chain-ethos-u55-256",
                 "--trial", "0", "-o", str(config)]) == 0  # fmt: skip
    capsys.readouterr()
    code, out = _verify(capsys, chain, "--config", str(config), "--samples", "2", "--json")
    assert code == 0, out
    data = json.loads(out)
    exported = json.loads(config.read_text())
    assert data["schedule"]["sram_used_bytes"] == exported["predicted"]["sram_used_bytes"]
    assert data["schedule"]["cascaded"] and data["samples"] == 2
    assert data["max_abs_diff"]["schedule_vs_reference"] == 0
    other = tmp_path / "other.tflite"
    other.write_bytes(CATALOGUE["branches"]().build())
    code, out = _verify(capsys, other, "--config", str(config))
    assert code == 2 and "was made for" in out


def test_a_missing_model_or_config_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _verify(capsys, tmp_path / "none.tflite", "--sram", "256KiB")
    assert (code, len(out.strip().splitlines())) == (2, 1)
    assert "not found" in out
    code, out = _verify(capsys, EXAMPLE, "--config", str(tmp_path / "cfg.json"))
    assert (code, len(out.strip().splitlines())) == (2, 1)
    assert "config" in out


@pytest.fixture(scope="module")
def small_unet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "unet_32.tflite"
    path.write_bytes(unet(size=32).build())
    return path


def test_a_unet_verifies_bit_for_bit_against_litert_reference_kernels(
    capsys: pytest.CaptureFixture[str], small_unet: Path
) -> None:
    """The U-Net of issue 20: LiteRT's built-in TRANSPOSE_CONV rounds a negative tie up, the
    NPU (and LiteRT's reference kernels) away from zero; through the decoder's convolutions
    that one step grows to 5 at the output. A model entirely on the NPU is checked against
    the reference kernels, and our reference, schedule and command streams equal them."""
    code, out = _verify(capsys, small_unet, "--sram", "1MiB", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["litert_kernels"] == "reference"
    assert data["max_abs_diff"] == EXACT


def test_verify_against_built_in_kernels_names_the_output_and_the_steps(
    small_unet: Path,
) -> None:
    """Checked against the built-in kernels the same U-Net fails, and the one line `dse
    verify` prints says which output and by how much."""
    found = session(small_unet, "ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    result = verify_point(found, PointConfig(1 << 20, None), kernels="builtin")
    assert result.litert_kernels == "builtin"
    assert result.max_abs_diff()["schedule_vs_reference"] == 0
    problem = _problem(result)
    assert problem.startswith(
        "output 0: the reference is 5 steps from LiteRT (builtin kernels, tolerance 1;"
    )
    assert "\n" not in problem


def test_reference_kernels_that_fail_give_none() -> None:
    """A model the reference kernels cannot run (here: not a model) fails in the child, not
    in the caller; `verify_point` then compares with the built-in kernels."""
    assert reference_kernel_outputs(b"not a flatbuffer", [[]]) is None


def test_the_litert_tolerance_counts_fully_connected_layers_in_a_chain() -> None:
    """Against the reference kernels a FULLY_CONNECTED rounds once where the NPU rounds twice;
    a chain of them may pass the step on (`cascader.verify.tolerance`)."""
    b = ModelBuilder(0, name="fc chain")
    x = b.input((1, 64))
    for _ in range(3):
        x = b.fully_connected(x, 64, activation="RELU")
    b.output(b.fully_connected(x, 8), b.conv2d(b.input((1, 8, 8, 4)), 4, kernel=1))
    model = b.build()
    assert litert_tolerance(model, "reference") == 4
    assert litert_tolerance(model, "builtin") == 1
    assert litert_tolerance(CATALOGUE["chain"]().build(), "reference") == 1
