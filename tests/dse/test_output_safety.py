"""Output that is all or nothing (issue 21): `dse compile`, `report`, `graph` and `export` never
write through a symlink, a rebuild leaves no file the new build does not list, a compile
that fails (nothing fits: exit 3) leaves the previous build byte-identical, and a folder
holding anything the command does not write is refused rather than replaced."""

from __future__ import annotations

import json
from pathlib import Path

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


@pytest.mark.parametrize("command", ["graph", "export"])
def test_a_file_output_replaces_a_symlink_instead_of_following_it(
    command: str, model: Path, study: str, tmp_path: Path
) -> None:
    victim, target = _victim(tmp_path), tmp_path / "out.json"
    target.symlink_to(victim)
    if command == "graph":
        argv = ["graph", "--model", str(model), "-o", str(target)]
    else:
        argv = ["export", "--storage", study, "--study", "s", "--max-sram", "256KiB"]
        argv += ["-o", str(target)]
    assert main(argv) == 0
    assert victim.read_text() == "not dse's\n"
    assert not target.is_symlink() and json.loads(target.read_text())
