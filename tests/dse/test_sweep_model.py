"""`dse sweep --model`: the README's main job on the bundled example, and bad model files."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from cascader.ethosu.vela_arch import DEFAULT_VELA_INI
from dse.cli import build_parser, main
from dse.commands.sweep import sweep_settings
from dse.evaluators import make_evaluator
from dse.space import DesignPoint
from dse.study import default_storage, open_if_present

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def test_sweep_on_the_example_model_finds_a_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "sweep",
            "--model",
            str(EXAMPLE),
            "--trials",
            "4",
            "--sram-min",
            "256KiB",
            "--sram-max",
            "1MiB",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    # By default a model study on Ethos-U55 has both producers: the 4 trials asked (the
    # cascader's seed first), and on top Vela's compiler at the arena sizes of its dense
    # sweeps within the range (256 KiB to 1 MiB: five) and with --optimise Size.
    assert result["trials"] == 4 + 6
    study = optuna.load_study(study_name=result["study"], storage=result["storage"])
    producers = [t.user_attrs["config"]["producer"] for t in study.trials]
    assert producers.count("vela") >= 6 and "cascader" in producers
    assert result["front"]
    for row in result["front"]:
        assert row["fits"]
        assert row["sram_used_bytes"] > 0
        assert row["total_cycles"] > 0
        if row["config"]["producer"] == "cascader":  # Vela's arena limit is a soft target
            assert row["sram_used_bytes"] <= row["config"]["sram_pool_bytes"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a TFLite file"),
        (b"\x1c\x00\x00\x00XXXXsome bytes that are not a model", "not a TFLite file"),
        (EXAMPLE.read_bytes()[:5000], "truncated or corrupt"),
    ],
    ids=["empty", "not-tflite", "truncated"],
)
def test_bad_model_files_are_one_line_and_leave_no_study(
    content: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(content)
    code = main(["sweep", "--model", str(model), "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "o" / "study.db").exists()


def test_a_continued_study_generates_proposals_for_its_own_range(tmp_path: Path) -> None:
    """Continued without range flags, a study's proposals are generated for its own largest
    pool, as its first run's and its workers' are, not for the command line's default."""
    base = ["sweep", "--model", str(EXAMPLE), "--out", str(tmp_path), "--trials", "6", "--json"]
    base += ["--producers", "cascader"]  # the cascader's proposals are what is checked
    assert main([*base, "--sram-min", "64KiB", "--sram-max", "256KiB"]) == 0
    assert main(base) == 0
    # What the continued run's evaluator was made from, as `dse sweep` makes it.
    args = build_parser().parse_args(base)
    settings, _ = sweep_settings(args, open_if_present(default_storage(tmp_path)))
    evaluate = make_evaluator(settings)
    evaluate(DesignPoint(128 * 1024))
    cascades = evaluate.session.scheduler.cascades
    assert cascades, "the continued study's point ran the cascader"
    assert {key[-1] for key in cascades} == {256 * 1024}


def test_a_continued_study_keeps_its_device_and_objectives(tmp_path: Path) -> None:
    """Continued by name alone, a study made for another device and objectives than the
    defaults runs on as it was made, rather than being refused for the defaults."""
    base = ["sweep", "--model", str(EXAMPLE), "--out", str(tmp_path), "--study", "s"]
    base += ["--trials", "2", "--json", "--producers", "cascader"]
    made = ["--accelerator-config", "ethos-u65-256", "--memory-mode", "Sram_Only"]
    made += ["--objectives", "cycles,sram,offchip", "--sram-min", "256KiB", "--sram-max", "1MiB"]
    assert main([*base, *made]) == 0
    assert main(base) == 0
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    trials = optuna.load_study(study_name="s", storage=storage).trials
    assert len(trials) == 4
    for trial in trials:
        assert len(trial.values) == 3
        metrics = trial.user_attrs["metrics"]
        assert (metrics["accelerator"], metrics["memory_mode"]) == ("ethos-u65-256", "Sram_Only")


def test_a_continued_study_refuses_another_vela_ini(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["sweep", "--model", str(EXAMPLE), "--out", str(tmp_path / "out"), "--trials", "2"]
    base += ["--sram-min", "128KiB", "--sram-max", "512KiB", "--json", "--producers", "cascader"]
    assert main(base) == 0
    ini = tmp_path / "vela.ini"
    ini.write_text(DEFAULT_VELA_INI.read_text())
    capsys.readouterr()
    assert main([*base, "--config", str(ini)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "drop --config to continue it" in err[0], err
    assert main(base) == 0  # the study was left whole
    assert json.loads(capsys.readouterr().out)["trials"] == 4
