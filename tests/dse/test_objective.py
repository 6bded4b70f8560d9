"""The objective's contract: points that do not fit, or that the flow cannot schedule at all,
are completed infeasible trials (never crashes), kept off the front and out of the plots."""

from __future__ import annotations

import math
from pathlib import Path

import optuna

from cascader.estimate import Estimate
from dse.coordinator import run_studies, study_run
from dse.front import pareto_front
from dse.objective import FEASIBILITY
from dse.report import write_report
from dse.scoring_pool import ScoringPool
from dse.space import DesignPoint, SearchSpace
from dse.study import SETTINGS_ATTR, StudySettings, open_storage
from dse.tickets import issue

SETTINGS = StudySettings(
    source_kind="model",
    source_path="m.tflite",
    source_sha256="0" * 64,
    accelerator="ethos-u55-256",
    system_config="Ethos_U55_High_End_Embedded",
    memory_mode="Shared_Sram",
    vela_config=None,
    sram_min=16 * 1024,
    sram_max=1024 * 1024,
    objectives=("cycles", "sram"),
    sampler="default",
)


def _score(point: DesignPoint) -> Estimate:
    """A stand-in evaluator with the three outcomes of the flow's estimate: below 64 KiB no
    schedule exists, up to 128 KiB the schedule needs 128 KiB, above that it fits."""
    pool = point.sram_pool_bytes
    options = point.config().options
    if pool < 64 * 1024:
        return Estimate(pool, options, False, None, None, unscheduled="no proposals")
    used = 128 * 1024 if pool <= 128 * 1024 else pool // 2
    return Estimate(pool, options, used <= pool, used, 10**9 // used)


def test_unscheduled_and_oversized_points_are_infeasible_trials(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat=False)
    study = optuna.create_study(storage=storage, study_name="o", directions=["minimize"] * 2)
    study.set_user_attr(SETTINGS_ATTR, SETTINGS.to_json())
    options = DesignPoint(0).cascader_options()
    grid = [{"sram_units": u, **options} for u in (2048, 6144, 16384, 32768)]  # 32..512 KiB
    assert issue(study, 4, grid, by="test") == 4
    space = SearchSpace(SETTINGS.sram_min, SETTINGS.sram_max)
    with ScoringPool(1, _score, lambda _settings: _score) as pool:
        run_studies([study_run(study, SETTINGS, space, None, True)], pool)

    by_pool = {t.user_attrs["config"]["sram_pool_bytes"] // 1024: t for t in study.trials}
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    unscheduled, oversized = by_pool[32], by_pool[96]
    assert all(math.isinf(v) for v in unscheduled.values)
    assert unscheduled.constraints == {FEASIBILITY: 32.0}
    assert oversized.constraints == {FEASIBILITY: 32.0}  # 128 KiB used in a 96 KiB pool
    assert {t.number for t in pareto_front(study)} == {by_pool[256].number, by_pool[512].number}
    files = write_report(study, tmp_path / "report")
    assert (tmp_path / "report" / "front.png").stat().st_size > 0 and files


def test_a_trial_failed_as_stale_while_scored_is_dropped_and_its_retry_runs(
    tmp_path: Path,
) -> None:
    """On a loaded machine another process may find a trial's heartbeat late while this one
    scores it, fail it and queue its retry: this process drops its result and goes on."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(
        storage=open_storage(url, heartbeat=False), study_name="o", directions=["minimize"] * 2
    )
    study.set_user_attr(SETTINGS_ATTR, SETTINGS.to_json())
    point = {"sram_units": 16384, **DesignPoint(0).cascader_options()}
    assert issue(study, 1, [point], by="test") == 1
    failed: list[int] = []

    def failed_elsewhere_once(at: DesignPoint) -> Estimate:
        if not failed:
            other = optuna.load_study(study_name="o", storage=open_storage(url, heartbeat=False))
            (running,) = other.get_trials(states=(optuna.trial.TrialState.RUNNING,))
            other.tell(running.number, state=optuna.trial.TrialState.FAIL)
            issue(other, 1, [point], by="retry")
            failed.append(running.number)
        return _score(at)

    space = SearchSpace(SETTINGS.sram_min, SETTINGS.sram_max)
    with ScoringPool(1, failed_elsewhere_once, lambda _settings: failed_elsewhere_once) as pool:
        run_studies([study_run(study, SETTINGS, space, None, True)], pool)
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {
        failed[0]: optuna.trial.TrialState.FAIL,
        failed[0] + 1: optuna.trial.TrialState.COMPLETE,
    }
