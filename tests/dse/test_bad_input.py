"""Bad input to the dse commands: one line naming the problem, exit 2 (3 when nothing fits),
and an existing study left exactly as it was."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import tflite

from dse.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
UNREACHABLE = "postgresql+psycopg2://nobody@127.0.0.1:1/none"


def _float_model(path: Path) -> Path:
    """The example with its first operator's output retyped to FLOAT32 in the flatbuffer."""
    data = bytearray(EXAMPLE.read_bytes())
    graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    tensor = graph.Tensors(int(graph.Operators(0).OutputsAsNumpy()[0]))
    type_field = tensor._tab.Offset(6)
    assert type_field, "the int8 type is stored explicitly"
    data[tensor._tab.Pos + type_field] = tflite.TensorType.FLOAT32
    path.write_bytes(bytes(data))
    return path


@pytest.fixture(scope="module")
def study_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study of the example with three trials, shared by the refusals below."""
    out = tmp_path_factory.mktemp("bad")
    argv = ["sweep", "--model", str(EXAMPLE), "--trials", "3", "--study", "s", "--out", str(out)]
    assert main([*argv, "--sram-min", "128KiB", "--sram-max", "1MiB", "--json"]) == 0
    return out


def _trial_states(out: Path) -> list[tuple[int, str]]:
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{out / 'study.db'}")
    return [(t.number, t.state.name) for t in study.trials]


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--sram-min", "2MiB", "--sram-max", "1MiB"], "larger than --sram-max"),
        (["--accelerator-config", "ethos-u99-1"], "ethos-u55-256"),
        (["--system-config", "No_Such_System"], "Ethos_U55_High_End_Embedded"),
        (["--memory-mode", "No_Such_Mode"], "Shared_Sram"),
        (["--objectives", "cycles"], "bad --objectives"),
    ],
    ids=["sram-range", "accelerator", "system-config", "memory-mode", "objectives"],
)
def test_bad_sweep_flags_name_the_problem_and_keep_the_study(
    study_out: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _trial_states(study_out)
    capsys.readouterr()
    argv = ["sweep", "--model", str(EXAMPLE), "--study", "s", "--out", str(study_out)]
    assert main([*argv, "--trials", "2", *extra]) == 2
    assert message in _one_line_error(capsys)
    assert _trial_states(study_out) == before


def test_unknown_names_list_the_valid_ones(study_out: Path, capsys: pytest.CaptureFixture[str]):
    capsys.readouterr()
    argv = ["sweep", "--model", str(EXAMPLE), "--out", str(study_out / "other")]
    assert main([*argv, "--accelerator-config", "ethos-u99-1"]) == 2
    line = _one_line_error(capsys)
    assert "ethos-u99-1" in line
    assert all(name in line for name in ("ethos-u55-32", "ethos-u55-256", "ethos-u65-512"))


def test_float_model_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _float_model(tmp_path / "float.tflite")
    assert main(["sweep", "--model", str(model), "--out", str(tmp_path / "o")]) == 2
    line = _one_line_error(capsys)
    assert "not fully int8-quantised" in line and "float op" in line
    assert not (tmp_path / "o" / "study.db").exists()


def test_missing_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--model", str(tmp_path / "nope.tflite")]) == 2
    assert "model file" in (line := _one_line_error(capsys)) and "not found" in line


def test_study_of_another_model_is_refused_and_kept(
    study_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _trial_states(study_out)
    other = tmp_path / "other.tflite"
    other.write_bytes(EXAMPLE.read_bytes() + b"\0")  # another file's sha256, still a model
    capsys.readouterr()
    argv = ["sweep", "--model", str(other), "--study", "s", "--out", str(study_out)]
    assert main([*argv, "--sram-min", "128KiB", "--sram-max", "1MiB"]) == 2
    assert "was made for" in _one_line_error(capsys)
    assert _trial_states(study_out) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["worker", "--storage", UNREACHABLE, "--study", "s"],
        ["report", "--storage", UNREACHABLE, "--study", "s"],
        ["export", "--storage", UNREACHABLE, "--study", "s", "--trial", "0", "-o", "cfg.json"],
    ],
    ids=["worker", "report", "export"],
)
def test_unreachable_storage_is_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert "cannot open storage" in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["worker", "report", "export"])
def test_unknown_study_lists_the_studies_there(
    study_out: Path, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{study_out / 'study.db'}"
    argv = [command, "--storage", storage, "--study", "nope"]
    if command == "export":
        argv += ["--trial", "0", "-o", str(tmp_path / "cfg.json")]
    capsys.readouterr()
    assert main(argv) == 2
    assert "no study named 'nope'" in (line := _one_line_error(capsys)) and "s" in line


def test_worker_refuses_a_changed_model_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(EXAMPLE.read_bytes())
    argv = ["sweep", "--model", str(model), "--trials", "2", "--study", "s", "--out", str(tmp_path)]
    argv += ["--producers", "cascader"]
    assert main([*argv, "--sram-min", "128KiB", "--sram-max", "1MiB", "--json"]) == 0
    json.loads(capsys.readouterr().out)
    model.write_bytes(EXAMPLE.read_bytes() + b"\0")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert main(["worker", "--storage", storage, "--study", "s", "--trials", "3"]) == 2
    assert "has changed since the study was made" in _one_line_error(capsys)
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
