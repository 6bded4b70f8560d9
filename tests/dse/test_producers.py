"""Two producers of points: the cascader and Vela's own compiler (in process), in one study on
Ethos-U55/U65, Vela's alone on Ethos-U85. Each trial records its producer, the front is
their union, a `vela` point exports the `vela` command that rebuilds it and `dse compile`
writes the very bytes that command writes; parallel scoring runs exactly the trials asked."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from cascader.ethosu.vela_compiler import VelaOptions, compile_model
from dse.cli import main
from dse.front import pareto_front
from dse.space import VELA_LADDER, align_down

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def _sweep(out: Path, *extra: str, trials: int = 30) -> None:
    argv = ["sweep", "--model", str(EXAMPLE), "--trials", str(trials), "--seed", "5"]
    argv += ["--study", "s"]
    assert main([*argv, "--out", str(out), "--json", *extra]) == 0


def _study(out: Path) -> optuna.Study:
    return optuna.load_study(study_name="s", storage=f"sqlite:///{out / 'study.db'}")


def _front(study: optuna.Study) -> list[tuple[int, float]]:
    return [
        (t.user_attrs["metrics"]["sram_used_bytes"], t.user_attrs["metrics"]["total_cycles"])
        for t in pareto_front(study)
    ]


def _matched(front: list[tuple[int, float]], sram: int, cycles: float) -> bool:
    return any(s <= sram and c <= cycles for s, c in front)


@pytest.fixture(scope="module")
def u55(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("u55")
    _sweep(out, "--producers", "cascader,vela")
    return out


@pytest.fixture(scope="module")
def u85(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("u85")
    _sweep(out, "--accelerator-config", "ethos-u85-256", trials=50)
    return out


def test_a_u55_study_has_both_producers_and_its_front_holds_vela_s_dense_sweep(u55: Path) -> None:
    study = _study(u55)
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(trials) == 30 + len(VELA_LADDER) + 1  # Vela's ladder and Size come on top
    producers = {t.user_attrs["metrics"]["producer"] for t in trials}
    assert producers == {"cascader", "vela"}
    assert all(t.user_attrs["config"]["producer"] == t.user_attrs["metrics"]["producer"]
               for t in trials)  # fmt: skip
    front = _front(study)
    for arena in VELA_LADDER[:8]:  # 16..192 KiB: past the model's largest useful arena
        options = VelaOptions("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram",
                              arena_size_limit=arena)  # fmt: skip
        vela = compile_model(EXAMPLE, options)
        assert _matched(front, vela.sram_used_bytes, vela.total_cycles), arena


def test_a_u85_study_is_vela_s_alone_and_matches_its_arena_sweep(u85: Path) -> None:
    """Vela's points at every 1/8 octave of arena from 16 to 256 KiB, 28 of the 33 between
    the seeded ladder's sizes: its (SRAM used, cycles) is not monotone in the arena, and the
    arena bisection (dse.refine) finds the points between. Not all: some lie in windows of
    1-3% of arena and beat the front by a fraction of a percent (arena 30,048 B: 26,864 B at
    492,509 cycles, where the front has 26,864 B at 499,679 and 28,912 B at 492,711). With 50
    trials the front matches all but at most 8 exactly (4 with this seed, 4 to 7 with seeds
    1-5, where front steps alone left 10 to 12) and comes within 5% of the cycles of each one
    it misses with no more SRAM (2.2% with this seed, at most 4.5% with seeds 1-5, where front
    steps alone left up to 12.5%)."""
    study = _study(u85)
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert {t.user_attrs["metrics"]["producer"] for t in trials} == {"vela"}
    assert "stripe_factors" not in trials[0].params  # no cascader option is asked for
    assert any("dse.bisect_of" in t.system_attrs for t in trials)
    front = _front(study)
    arenas = sorted({align_down(round(16 * 1024 * 2 ** (i / 8))) for i in range(33)})
    assert len(arenas) == 33 and len(set(arenas) - set(VELA_LADDER)) == 28
    missed = []
    for arena in arenas:
        options = VelaOptions("ethos-u85-256", "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB",
                              arena_size_limit=arena)  # fmt: skip
        vela = compile_model(EXAMPLE, options)
        if not _matched(front, vela.sram_used_bytes, vela.total_cycles):
            missed.append((arena, vela.sram_used_bytes, vela.total_cycles))
    assert len(missed) <= 8, missed
    for arena, sram, cycles in missed:
        assert _matched(front, sram, cycles * 1.05), (arena, sram, cycles, front)


@pytest.mark.parametrize("device", ["u55", "u85"])
def test_a_vela_point_compiles_to_the_bytes_of_its_exported_vela_command(
    device: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    out = request.getfixturevalue(device)
    study = _study(out)
    vela_trials = [t for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
                   if t.user_attrs["config"]["producer"] == "vela"
                   and t.user_attrs["metrics"]["fits"]]  # fmt: skip
    trial = vela_trials[len(vela_trials) // 2]
    config = tmp_path / "cfg.json"
    storage = f"sqlite:///{out / 'study.db'}"
    argv = ["export", "--storage", storage, "--study", "s", "--trial", str(trial.number)]
    assert main([*argv, "-o", str(config)]) == 0
    exported = json.loads(config.read_text())
    assert exported["producer"] == "vela"
    assert (
        exported["predicted"]["sram_used_bytes"] == trial.user_attrs["metrics"]["sram_used_bytes"]
    )
    assert main(["compile", "--model", str(EXAMPLE), "--config", str(config),
                 "-o", str(tmp_path / "build")]) == 0  # fmt: skip
    ours = (tmp_path / "build" / f"{EXAMPLE.stem}_vela.tflite").read_bytes()
    command = exported["vela"]["command_line"]
    assert command[0] == "vela" and command[1] == str(EXAMPLE)
    vela_out = tmp_path / "vela"
    script = Path(sys.executable).with_name("vela")
    vela = [str(script)] if script.exists() else [shutil.which("vela") or "vela"]
    subprocess.run([*vela, *command[1:-1], str(vela_out)], check=True, capture_output=True)
    assert (vela_out / f"{EXAMPLE.stem}_vela.tflite").read_bytes() == ours


def test_the_report_of_a_u85_study_shows_vela_s_per_layer_costs(u85: Path) -> None:
    out = u85 / "report"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", "--storage", f"sqlite:///{u85 / 'study.db'}", "--study", "s",
                     "--out", str(out)]) == 0  # fmt: skip
    assert (out / "layers.png").is_file() and not (out / "memory.png").exists()
    page = (out / "report.html").read_text()
    assert (
        "from Vela&#x27;s own per-layer report" in page
        or "from Vela's own per-layer report" in page
    )
    assert "CONV_2D #0" in page and "SOFTMAX #" in page


def test_the_cascader_is_refused_on_ethos_u85_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "--model", str(EXAMPLE), "--out", str(tmp_path)]
    assert main([*argv, "--accelerator-config", "ethos-u85-256", "--producers", "cascader"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--producers vela" in err[0]
    assert main([*argv, "--producers", "vela,tvm"]) == 2
    assert "bad --producers" in capsys.readouterr().err
    assert not (tmp_path / "study.db").exists()


def test_parallel_scoring_runs_exactly_the_trials_asked_and_shares_proposals(
    tmp_path: Path,
) -> None:
    argv = ["sweep", "--model", str(EXAMPLE), "--trials", "24", "--jobs", "2", "--study", "s"]
    argv += ["--producers", "cascader"]  # the cascader's proposals are what is shared
    assert main([*argv, "--out", str(tmp_path)]) == 0
    study = _study(tmp_path)
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 24 == len(states)
    workers = {t.user_attrs["worker"] for t in study.trials}
    assert len(workers) == 1  # this process asks and records every trial
    # Front refinements (steps, gap probes) are taken while points are scored elsewhere
    # (dse.refine).
    marks = {"dse.step_of", "dse.probe_of"}
    assert any(marks & t.system_attrs.keys() for t in study.trials)


def test_estimate_on_ethos_u85_is_vela_s_and_verify_runs_a_vela_config_s_own_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], u55: Path
) -> None:
    assert main(["estimate", "--model", str(EXAMPLE), "--accelerator-config", "ethos-u85-256",
                 "--sram", "64KiB", "--json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    options = VelaOptions("ethos-u85-256", "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB",
                          arena_size_limit=64 * 1024)  # fmt: skip
    vela = compile_model(EXAMPLE, options)
    assert data["producer"] == "vela" and data["total_cycles"] == vela.total_cycles
    # Vela's per-layer report: its operations' cycles add up to its total, each named by
    # its TFLite operator as the cascader's are.
    assert sum(op["cycles"] for op in data["ops"]) == vela.total_cycles
    assert {op["tflite_op"] for op in data["ops"]} >= {"CONV_2D", "SOFTMAX"}
    assert data["sram_used_bytes"] == vela.sram_used_bytes <= 64 * 1024
    study = _study(u55)
    trial = next(t for t in study.trials if t.user_attrs["config"]["producer"] == "vela"
                 and t.user_attrs["metrics"]["fits"])  # fmt: skip
    config = tmp_path / "cfg.json"
    storage = f"sqlite:///{u55 / 'study.db'}"
    assert main(["export", "--storage", storage, "--study", "s", "--trial", str(trial.number),
                 "-o", str(config)]) == 0  # fmt: skip
    capsys.readouterr()
    # Verified, a Vela point's own file runs on the simulator against LiteRT, as `dse simulate`
    # runs it: there is no schedule of ours to compare with the reference.
    assert main(["verify", "--model", str(EXAMPLE), "--config", str(config), "--samples", "2",
                 "--json"]) == 0  # fmt: skip
    checked = json.loads(capsys.readouterr().out)
    assert checked["findings"] == [] and checked["samples"] == 2
    assert checked["ethos_u_ops"] >= 1
