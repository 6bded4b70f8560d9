"""A sweep's scoring workers take over the model its process prepared: they score without
importing TVM or preparing the model again, and give the estimates this process gives."""

from __future__ import annotations

import sys
from pathlib import Path

from dse import scoring_pool
from dse.evaluators import handover, make_evaluator
from dse.scoring_pool import ScoringPool, settings_key
from dse.space import DesignPoint
from dse.study import StudySettings, model_sha256

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def imported_tvm() -> bool:
    """Whether this process has imported TVM (asked of a worker)."""
    return "tvm" in sys.modules


def _settings(producers: tuple[str, ...]) -> StudySettings:
    return StudySettings("model", str(EXAMPLE), model_sha256(EXAMPLE), "ethos-u55-256",
                         "Ethos_U55_High_End_Embedded", "Shared_Sram", None, 16 * 1024, 1 << 20,
                         ("cycles", "sram"), "default", producers)  # fmt: skip


def test_a_worker_scores_the_handed_over_model_without_tvm() -> None:
    settings = _settings(("cascader", "vela"))
    here = make_evaluator(settings)
    point = DesignPoint(96 * 1024)
    with ScoringPool(2, make_evaluator, lambda _settings: here) as pool:
        pool.warm(settings, handover(here))
        worker = pool._workers[0]
        scored = worker.submit(scoring_pool._score, settings_key(settings), point).result()
        assert not worker.submit(imported_tvm).result()
    assert scored.estimate.to_json() == here(point).to_json()


def test_nothing_is_handed_over_for_vela_s_producer_alone() -> None:
    assert handover(make_evaluator(_settings(("vela",)))) is None
