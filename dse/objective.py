"""A trial's point and results: what it stores (TrialRecorder), the objectives and constraint
of an estimate, and the evaluator that scores each point once (MemoizedEvaluator)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

import optuna

from cascader.estimate import Estimate
from cascader.memo import Memo
from dse.cache_stats import CacheCounter
from dse.space import DesignPoint, SearchSpace
from dse.study import StudySettings
from dse.tickets import ticket_storage, worker_id

# An evaluator scores one point: the model's (Vela's model over the point's schedule) or a
# graph's (the cascader's own cost); both return the typed Estimate trials store.
Evaluator = Callable[[DesignPoint], Estimate]

FEASIBILITY = "sram_over_pool"


class MemoizedEvaluator(ABC):
    """An evaluator that scores each point once for its life (a point is a few bytes of key
    and one estimate) and counts its hits and misses (`_results`); a subclass gives
    `_estimate`."""

    def __init__(self) -> None:
        self._scored: Memo[DesignPoint, Estimate] = Memo("evaluator scored points")

    @property
    def _results(self) -> CacheCounter:
        return CacheCounter(self._scored.hits, self._scored.misses)

    def __call__(self, point: DesignPoint) -> Estimate:
        found = self._scored.lookup(point)
        if found is None:
            found = self._estimate(point)
            self._scored.keep(point, found)
        return found

    @abstractmethod
    def _estimate(self, point: DesignPoint) -> Estimate:
        """The point's estimate, computed (called once per point)."""


_DISTS = ("cascader-dse", "apache-tvm", "ethos-u-vela", "optuna", "numpy", "scipy")


def tool_versions() -> dict[str, str]:
    found = {}
    for dist in _DISTS:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "not installed"
    return found


def overflow_kib(estimate: Estimate, pool: int) -> float:
    """Optuna's constraint value: 0 when the point fits, else KiB over the pool. A point the
    flow could not schedule at all (no SRAM figure) counts as needing twice the pool."""
    if estimate.fits:
        return 0.0
    used = estimate.sram_used_bytes
    return max(used - pool, 1) / 1024.0 if used is not None else pool / 1024.0


def objective_values(estimate: Estimate, objectives: tuple[str, ...]) -> list[float]:
    """The objectives of a point; infinite for a point without a schedule to score."""
    if estimate.total_cycles is None or estimate.sram_used_bytes is None:
        return [math.inf] * len(objectives)
    offchip = estimate.bytes.get("dram", 0) + estimate.bytes.get("offchip_flash", 0)
    pick = {
        "cycles": float(estimate.total_cycles),
        "sram": float(estimate.sram_used_bytes),
        "offchip": float(offchip),
    }
    return [pick[name] for name in objectives]


class TrialRecorder:
    """What a trial stores: its point before the point is scored (a retry of a killed
    worker's trial runs the same point), its results after, each in one transaction. A
    point that does not fit its pool is still a completed trial, with a positive constraint
    value (how far over the pool it is): samplers learn from it, fronts skip it."""

    def __init__(self, settings: StudySettings, space: SearchSpace) -> None:
        self.settings = settings
        self.space = space
        self.versions = tool_versions()
        self.worker = worker_id()

    def start(self, trial: optuna.Trial) -> DesignPoint:
        with ticket_storage(trial.study).batched(trial._trial_id):
            trial.set_user_attr("worker", self.worker)
            return self.space.suggest(trial)

    def finish(
        self, trial: optuna.Trial, point: DesignPoint, estimate: Estimate, seconds: float
    ) -> list[float]:
        """Store the point's results and the seconds its evaluator took."""
        with ticket_storage(trial.study).batched(trial._trial_id):
            trial.set_user_attr("score_seconds", round(seconds, 6))
            trial.set_constraint(FEASIBILITY, overflow_kib(estimate, point.sram_pool_bytes))
            trial.set_user_attr("config", point.to_json())
            trial.set_user_attr("metrics", estimate.to_json())
            trial.set_user_attr("model_sha256", self.settings.source_sha256)
            trial.set_user_attr("versions", self.versions)
        return objective_values(estimate, self.settings.objectives)
