"""Output that is all or nothing (issue 21): `dse compile`, `report`, `graph` and `export` never
write through a symlink, a rebuild leaves no file the new build does not list, a compile
that fails (nothing fits: exit 3) leaves the previous build byte-identical, and a folder
holding anything the command does not write is refused rather than replaced."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import optuna
import pytest

from cascader.testing.networks import single_op_model
from dse.cli import main

FITS, TOO_SMALL = "16KiB", "1KiB"  # the model's smallest schedule needs 2.8 KiB


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "conv.tflite"
    path.write_bytes(single_op_model("CONV_2D", stride=2, padding="VALID"))
    return path


@pytest.fixture(scope="module")
def study(model: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("study")
    argv = ["sweep", "--model", str(model), "--study", "s", "--out", str(out), "--trials", "3"]
    assert main([*argv, "--sram-min", "16KiB", "--sram-max", "256KiB", "--json"]) == 0
    return f"sqlite:///{out / 'study.db'}"


def _compile(model: Path, out: Path, sram: str) -> int:
    return main(["compile", "--model", str(model), "--sram", sram, "-o", str(out)])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("not dse's\n")
    return victim


def test_a_failed_compile_leaves_the_previous_build_byte_identical(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "build"
    assert _compile(model, out, FITS) == 0
    before = _snapshot(out)
    assert _compile(model, out, TOO_SMALL) == 3
    assert "nothing fits" in capsys.readouterr().err
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build"], "staging left behind"


def test_a_rebuild_replaces_symlinks_and_removes_what_it_does_not_list(
    model: Path, tmp_path: Path
) -> None:
    out, victim = tmp_path / "build", _victim(tmp_path)
    assert _compile(model, out, FITS) == 0
    (out / "npu0.cs").unlink()
    (out / "npu0.cs").symlink_to(victim)
    (out / "npu1.cs").write_bytes(b"an earlier two-stream build's")
    (out / "npu1.payload").write_bytes(b"an earlier two-stream build's")
    assert _compile(model, out, "64KiB") == 0
    assert victim.read_text() == "not dse's\n"
    assert not (out / "npu0.cs").is_symlink()
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {manifest["model"], "manifest.json", "constants.bin"}
    for function in manifest["functions"]:
        listed |= {function["command_stream"], function["driver_payload"]}
    assert {p.name for p in out.iterdir()} == listed


@pytest.mark.parametrize("command", ["compile", "report"])
def test_an_output_folder_that_is_a_symlink_or_holds_foreign_files_is_refused(
    command: str, model: Path, study: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "manifest.json" if command == "compile" else mixed / "report.html").write_text("{}")
    (mixed / "study.db").write_bytes(b"the user's")
    for out, words in ((tmp_path / "link", "is a symlink"), (mixed, "holds study.db")):
        if command == "compile":
            assert _compile(model, out, FITS) == 2
        else:
            assert main(["report", "--storage", study, "--study", "s", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err
    assert list(elsewhere.iterdir()) == []
    assert (mixed / "study.db").read_bytes() == b"the user's"


def test_a_report_is_replaced_whole_and_never_written_through_a_symlink(
    study: str, tmp_path: Path
) -> None:
    out, victim = tmp_path / "report", _victim(tmp_path)
    argv = ["report", "--storage", study, "--study", "s", "--out", str(out)]
    assert main(argv) == 0
    first = _snapshot(out)
    (out / "summary.md").unlink()
    (out / "summary.md").symlink_to(victim)
    (out / "old_plot.png").write_bytes(b"from an earlier report")
    assert main(argv) == 0
    assert victim.read_text() == "not dse's\n"
    assert not (out / "summary.md").is_symlink()
    assert set(_snapshot(out)) == set(first)


def _file_output(command: str, model: Path, study: str, target: Path) -> list[str]:
    if command == "graph":
        return ["graph", "--model", str(model), "-o", str(target)]
    if command == "cut":
        return ["cut", "--model", str(model), "--samples", "2", "-o", str(target)]
    argv = ["export", "--storage", study, "--study", "s", "--max-sram", "256KiB"]
    return [*argv, "-o", str(target)]


FILE_OUTPUTS = ["graph", "export", "cut"]


@pytest.mark.parametrize("command", FILE_OUTPUTS)
def test_a_file_output_replaces_only_an_earlier_output_of_its_own_kind(
    command: str, model: Path, study: str, tmp_path: Path
) -> None:
    target = tmp_path / "out"
    argv = _file_output(command, model, study, target)
    assert main(argv) == 0
    first = target.read_bytes()
    target.write_bytes(first)
    assert main(argv) == 0 and target.read_bytes() == first


def _special(kind: str, tmp_path: Path, study: str) -> Path:
    """Something at the output path that is not this command's earlier output."""
    target = tmp_path / kind
    if kind == "symlink":
        target.symlink_to(_victim(tmp_path))
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("making a device file needs root")
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # as /dev/null
    elif kind == "study":  # a copy: the study read may itself be written to (its caches)
        shutil.copy(study.removeprefix("sqlite:///"), target)
    else:
        target.write_text("not dse's\n")
    return target


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device", "study", "foreign"])
@pytest.mark.parametrize("command", FILE_OUTPUTS)
def test_a_file_output_never_replaces_what_it_did_not_write(
    command: str, kind: str, model: Path, study: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    target = _special(kind, tmp_path, study)
    before = os.lstat(target)
    content = target.read_bytes() if kind in ("study", "foreign") else None
    assert main(_file_output(command, model, study, target)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(target) in err[0], err
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    if content is not None:
        assert target.read_bytes() == content
    if kind == "symlink":
        assert (tmp_path / "victim.txt").read_text() == "not dse's\n"


def test_export_over_the_study_it_reads_is_refused(
    study: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43's case: `-o` naming the study database itself."""
    database = Path(study.removeprefix("sqlite:///"))
    trials = len(optuna.load_study(study_name="s", storage=study).trials)
    argv = ["export", "--storage", study, "--study", "s", "--max-sram", "256KiB"]
    assert main([*argv, "-o", str(database)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a database" in err[0], err
    assert len(optuna.load_study(study_name="s", storage=study).trials) == trials
