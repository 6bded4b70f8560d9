"""The SoC question in one command: a workload of models with latency budgets on several NPU
configurations, one study per (model, configuration), answered per configuration as the
smallest SRAM at which every model meets its budget; checked against brute force over a
fine ladder of pools, exported one config per model, refused in one line when bad."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from pages import check_page_renders

from cascader.testing.architectures import build_cached
from dse.cli import main
from dse.driver import space_of
from dse.evaluators import make_evaluator
from dse.space import DesignPoint, SearchSpace
from dse.study import load_settings
from dse.workload import WORKLOAD_ATTR, workload_studies
from dse.workload_answer import ModelFront, ModelPoint, config_answer, workload_answers

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
CONFIGS = "ethos-u55-128,ethos-u85-256"
BUDGET_MS = "1.5"


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("workload")
    argv = ["sweep", "--model", str(EXAMPLE), "--model", str(build_cached("ds_cnn")),
            "--accelerator-config", CONFIGS, "--budget-ms", BUDGET_MS, "--trials", "30",
            "--seed", "3", "--study", "w", "--out", str(out), "--json"]  # fmt: skip
    assert main(argv) == 0
    return out


def _studies(out: Path) -> list[optuna.Study]:
    return workload_studies(f"sqlite:///{out / 'study.db'}", "w")


def _naive_answer(fronts: list[ModelFront]) -> int | None:
    """The smallest SRAM, among all the points' SRAM figures, at which each model's fastest
    point within it meets its budget."""
    for sram in sorted({p.sram for f in fronts for p in f.points}):
        best = [f.fastest_within(sram) for f in fronts]
        if all(b is not None and b.time_s <= f.budget_s for b, f in zip(best, fronts, strict=True)):
            return sram
    return None


def test_a_workload_has_one_study_per_model_and_configuration(workload: Path) -> None:
    studies = _studies(workload)
    names = sorted(s.study_name for s in studies)
    assert names == sorted(f"w:{m}-{a}" for m in ("mobilenet_like_96", "ds_cnn")
                           for a in CONFIGS.split(","))  # fmt: skip
    for study in studies:
        settings = load_settings(study)
        u85 = settings.accelerator.startswith("ethos-u85")
        assert settings.producers == (("vela",) if u85 else ("cascader", "vela"))
        assert study.user_attrs[WORKLOAD_ATTR]["budget_s"] == pytest.approx(1.5e-3)
        assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) >= 10
    total = sum(len(s.trials) for s in studies)
    ladder = sum(len(space_of(load_settings(s)).vela_seeds()) for s in studies)
    assert total == 4 * 30 + ladder  # the trials asked, spread where the answer is decided


def test_the_answer_matches_brute_force_over_a_fine_ladder(workload: Path) -> None:
    """Every pool of a 1/4-octave ladder over the studies' range up to 512 KiB with each seed
    kind (and Vela's compiler) evaluated per (model, configuration): the answer computed
    from those points is the naive one, and the sweep's needs no more SRAM than it."""
    studies = _studies(workload)
    by_config: dict[str, list[ModelFront]] = {}
    for study in studies:
        settings = replace(load_settings(study), sram_max=512 * 1024)
        evaluate = make_evaluator(settings)
        space = SearchSpace(settings.sram_min, settings.sram_max, cascader_optional=True,
                            producers=settings.producers)  # fmt: skip
        kinds = [*space.seed_kinds(), DesignPoint(0, producer="vela")]
        kinds = [k for k in kinds if k.producer in settings.producers]
        points = []
        for pool in space.sram_ladder(steps_per_octave=4):
            for kind in kinds:
                e = evaluate(replace(kind, sram_pool_bytes=pool))
                if e.fits and e.total_cycles is not None:
                    points.append(ModelPoint(e.sram_used_bytes, e.inference_time_s,
                                             e.total_cycles, e.producer, -1))  # fmt: skip
        attr = study.user_attrs[WORKLOAD_ATTR]
        by_config.setdefault(settings.accelerator, []).append(
            ModelFront(attr["model"], attr["budget_s"], 1.0, tuple(points), study.study_name)
        )
    swept = {a.accelerator: a for a in workload_answers(studies)}
    for accelerator, fronts in by_config.items():
        brute = config_answer(accelerator, "", "", fronts)
        assert brute.sram == _naive_answer(fronts)
        assert brute.sram is not None, accelerator
        assert swept[accelerator].sram is not None
        assert swept[accelerator].sram <= brute.sram, (accelerator, swept[accelerator].sram,
                                                       brute.sram)  # fmt: skip


def test_report_and_export_answer_the_question(
    workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{workload / 'study.db'}"
    report = tmp_path / "report"
    assert main(["report", "--storage", storage, "--workload", "w", "--out", str(report)]) == 0
    html = (report / "report.html").read_text()
    assert "fewest MACs" in html and "ethos-u85-256" in html
    assert (report / "workload.png").stat().st_size > 0 and (report / "models.png").is_file()
    check_page_renders(report, tmp_path)
    answers = {a.accelerator: a for a in workload_answers(_studies(workload))}
    best = min((a for a in answers.values() if a.sram is not None), key=lambda a: a.macs)
    out = tmp_path / "configs"
    assert main(["export", "--storage", storage, "--workload", "w", "-o", str(out)]) == 0
    summary = json.loads((out / "workload.json").read_text())
    assert summary["accelerator"] == best.accelerator and summary["sram_bytes"] == best.sram
    for name in ("mobilenet_like_96", "ds_cnn"):
        config = json.loads((out / f"{name}.json").read_text())
        assert config["predicted"]["sram_used_bytes"] <= best.sram
        assert config["accelerator"] == best.accelerator
        budget = 1.5e-3
        assert config["predicted"]["inference_time_s"] <= budget
    model = tmp_path / "ds_cnn.tflite"
    model.write_bytes(build_cached("ds_cnn").read_bytes())
    capsys.readouterr()
    assert main(["compile", "--model", str(model), "--config", str(out / "ds_cnn.json"),
                 "-o", str(tmp_path / "build")]) == 0  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--model", "missing.tflite"], 2, "missing.tflite"),
        (["--accelerator-config", "ethos-u55-256,ethos-u99-1"], 2, "unknown accelerator"),
        (["--budget-ms", "-1"], 2, "positive number of milliseconds"),
    ],
)
def test_bad_workload_input_is_one_line(
    extra: list[str], code: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "--model", str(EXAMPLE), "--model", str(build_cached("ds_cnn")),
            "--out", str(tmp_path), "--trials", "4"]  # fmt: skip
    assert main([*argv, *extra]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "study.db").exists()


def test_a_budget_no_configuration_meets_gets_the_closest_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "--model", str(EXAMPLE), "--model", str(build_cached("ds_cnn")),
            "--accelerator-config", CONFIGS, "--budget-ms", "0.001", "--trials", "20",
            "--study", "tight", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "no configuration meets these budgets; the closest is ethos-u85-256" in out
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    code = main(["export", "--storage", storage, "--workload", "tight", "-o", str(tmp_path / "c")])
    assert code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no configuration meets" in err[0]
