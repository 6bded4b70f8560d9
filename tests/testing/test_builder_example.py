"""The checked-in example model is what its regenerate command writes, and fits the brief."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascader.testing import make_example
from cascader.testing.shared import shared_dir
from cascader.testing.vela_check import compile_with_vela

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def test_regenerate_command_writes_the_checked_in_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.tflite"
    assert make_example.main([str(out)]) == 0
    assert out.read_bytes() == EXAMPLE.read_bytes()
    assert "36 ops" in capsys.readouterr().out


def test_example_is_a_small_mobilenet_of_30_plus_ops_at_96x96() -> None:
    summary = make_example.describe(EXAMPLE.read_bytes())
    assert summary.input_shape == (1, 96, 96, 3) and summary.output_shape == (1, 10)
    assert summary.ops >= 30 and summary.file_bytes < 500_000
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "MEAN", "SOFTMAX"} <= set(summary.op_counts)
    assert summary.macs == 15_940_352


def test_example_compiles_entirely_to_the_npu(tmp_path: Path) -> None:
    result = compile_with_vela(EXAMPLE.read_bytes(), tmp_path, name="example")
    assert result.cpu_ops == 0 and result.cpu_op_kinds == ()


def test_describe_agrees_with_the_shared_models_readme() -> None:
    shared = shared_dir()
    model = shared / "models" / "vww_mobilenet_v1_025.tflite" if shared else None
    if model is None or not model.is_file():
        pytest.skip("shared/models not present")
    summary = make_example.describe(model.read_bytes())
    assert (summary.ops, summary.macs, summary.constant_bytes) == (31, 7_489_664, 219_072)
    assert summary.largest_activation_bytes == 36_864
