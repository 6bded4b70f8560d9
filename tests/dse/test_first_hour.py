"""What a new user trips over in the first hour: Ctrl-C says one line and loses nothing (a
rerun finishes the study to the trials asked), report and export find the default sweep's
study without its URL, and a workload's studies can be served by `dse worker`."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from cascader.testing.shared import shared_dir
from dse.cli import main

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
SHARED = shared_dir()


def _completed(path: Path) -> int:
    """Completed trials in the SQLite database at `path`, read only: a poll must neither make
    the storage's tables (racing the sweep making them) nor hold a lock the sweep waits on."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return db.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0]
    except sqlite3.Error:  # not made yet
        return 0


def _states(url: str, name: str) -> dict[str, int]:
    study = optuna.load_study(study_name=name, storage=url)
    states: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        states[t.state.name] = states.get(t.state.name, 0) + 1
    return states


def test_ctrl_c_is_one_line_and_a_rerun_finishes_the_trials_asked(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "dse", "sweep", "--model", str(EXAMPLE), "--trials", "24",
            "--study", "s", "--out", str(tmp_path), "--json",
            "--producers", "cascader"]  # fmt: skip
    # The sweep takes Ctrl-C as a terminal gives it, even when this run ignores SIGINT (as a
    # job started in the background of a script does, and its children after it).
    restore = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=restore)  # fmt: skip
    url = f"sqlite:///{tmp_path / 'study.db'}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and _completed(tmp_path / "study.db") < 6:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["dse sweep: interrupted"]
    states = _states(url, "s")
    assert states.get("WAITING", 0) > 0 and states.get("RUNNING", 0) == 0
    assert main(argv[3:]) == 0  # the same command again
    done = optuna.load_study(study_name="s", storage=url).get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 24


def test_report_and_export_default_to_the_sweep_folder_and_its_only_study(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["report"]) == 2
    assert "give --storage URL" in capsys.readouterr().err
    assert main(["sweep", "--model", str(EXAMPLE), "--trials", "6", "--json"]) == 0
    assert main(["report"]) == 0
    assert (
        tmp_path / "dse-out" / "report-mobilenet_like_96-ethos-u55-256" / "report.html"
    ).is_file()
    assert main(["export", "--max-sram", "4MiB", "-o", "cfg.json"]) == 0
    assert (tmp_path / "cfg.json").is_file()
    assert main(["sweep", "--model", str(EXAMPLE), "--trials", "3", "--study", "b"]) == 0
    capsys.readouterr()
    assert main(["report"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--study b" in err[0] and "--study mobilenet_like_96" in err[0]


def test_a_worker_serves_a_workload_s_studies(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    argv = ["sweep", "--model", str(EXAMPLE), "--accelerator-config", "ethos-u55-256,ethos-u85-256",
            "--trials", "20", "--study", "w", "--storage", url, "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    names = ("w:mobilenet_like_96-ethos-u55-256", "w:mobilenet_like_96-ethos-u85-256")
    before = {n: _states(url, n).get("COMPLETE", 0) for n in names}
    worker = ["worker", "--storage", url, "--workload", "w", "--trials", "3"]
    done = subprocess.run([sys.executable, "-m", "dse", *worker], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ran 6 trial(s) of workload w (2 studies, 6 issued now)" in done.stdout
    for name, count in before.items():
        assert _states(url, name).get("COMPLETE", 0) == count + 3


@pytest.mark.parametrize("model", ["example", "vww_mobilenet_v1_025"])
def test_the_floor_a_refusal_names_fits(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`nothing fits in X; the smallest schedule needs Y`: Y (aligned) then fits, as the
    sweep's floor does (proposals made for a larger region, as a sweep makes them)."""
    if model == "example":
        path = EXAMPLE
    elif SHARED is None:
        pytest.skip("../shared/models missing")
    else:
        path = SHARED / "models" / f"{model}.tflite"
    assert main(["estimate", "--model", str(path), "--sram", "16KiB"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the smallest schedule needs" in err[0]
    need = int(err[0].rsplit("needs ", 1)[1].split()[0])
    assert (
        main(["estimate", "--model", str(path), "--sram", str(-(-need // 16) * 16), "--json"]) == 0
    )
