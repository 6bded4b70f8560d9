"""`dse verify`: litert, the unscheduled reference and the stripe schedule on random inputs,
for the example network and builder models, cascader on/off and striping on/off; the errors a
user can act on exit 2 or 3 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascader.testing.networks import CATALOGUE
from dse.cli import main

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
    code, out = _verify(capsys, EXAMPLE, "--sram", "256KiB", "--samples", "2", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["samples"] == 2
    assert data["max_abs_diff"]["schedule_vs_reference"] == 0
    assert data["max_abs_diff"]["reference_vs_litert"] <= 1
    (output,) = data["outputs"]
    assert output["shape"] == [1, 10]
    assert output["schedule_vs_reference"]["elements"] == 20
    assert output["schedule_vs_reference"]["exact"] == 1.0
    assert data["schedule"]["cascaded"] and data["schedule"]["stripes"] > 67
    assert 0 < data["schedule"]["sram_used_bytes"] <= 256 * 1024


@pytest.mark.parametrize(
    "flags",
    [
        ["--sram", "64KiB"],
        ["--sram", "1MiB", "--no-striping"],
        ["--sram", "256KiB", "--multi-dimensional-striping"],
        ["--sram", "256KiB", "--no-cascade"],
    ],
)
def test_schedules_of_a_builder_network_equal_the_reference(
    capsys: pytest.CaptureFixture[str], chain: Path, flags: list[str]
) -> None:
    code, out = _verify(capsys, chain, *flags, "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["max_abs_diff"]["schedule_vs_reference"] == 0
    assert data["schedule"]["cascaded"] == ("--no-cascade" not in flags)


def test_verify_prints_a_table(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    code, out = _verify(capsys, chain, "--sram", "256KiB")
    assert code == 0, out
    assert "schedule vs reference" in out and "cascaded schedule of" in out


def test_a_pool_nothing_fits_in_exits_3(capsys: pytest.CaptureFixture[str], chain: Path) -> None:
    code, out = _verify(capsys, chain, "--sram", "1KiB")
    assert code == 3
    assert "nothing fits in 1024 bytes; the smallest schedule needs" in out
    assert len(out.strip().splitlines()) == 1


def test_a_model_with_host_ops_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "host.tflite"
    path.write_bytes(CATALOGUE["DEPTHWISE_CONV_2D-multiplier2"]().build())
    code, out = _verify(capsys, path, "--sram", "256KiB")
    assert code == 2
    assert "only models that run entirely on the NPU" in out
    assert len(out.strip().splitlines()) == 1


def test_a_missing_model_or_config_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _verify(capsys, tmp_path / "none.tflite", "--sram", "256KiB")
    assert (code, len(out.strip().splitlines())) == (2, 1)
    assert "not found" in out
    code, out = _verify(capsys, EXAMPLE, "--config", str(tmp_path / "cfg.json"))
    assert (code, len(out.strip().splitlines())) == (2, 1)
    assert "config" in out
