"""The Optuna objective: trial -> design point -> evaluator -> objectives, attrs, constraint."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

import optuna

from dse.space import DesignPoint, SearchSpace
from dse.study import StudySettings

# An evaluator scores one point: it returns the estimate object of DESIGN.md ("fits",
# "sram_used_bytes", "total_cycles", "bytes", ...).
Evaluator = Callable[[DesignPoint], dict]

FEASIBILITY = "sram_over_pool"
_DISTS = ("cascader-dse", "apache-tvm", "ethos-u-vela", "optuna", "numpy", "scipy")


def tool_versions() -> dict[str, str]:
    found = {}
    for dist in _DISTS:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "not installed"
    return found


def objective_values(metrics: dict, objectives: tuple[str, ...]) -> list[float]:
    pick = {
        "cycles": lambda m: float(m["total_cycles"]),
        "sram": lambda m: float(m["sram_used_bytes"]),
        "offchip": lambda m: float(m["bytes"].get("dram", 0) + m["bytes"].get("offchip_flash", 0)),
    }
    return [pick[name](metrics) for name in objectives]


def make_objective(
    settings: StudySettings, space: SearchSpace, evaluate: Evaluator
) -> Callable[[optuna.Trial], list[float]]:
    """A point that does not fit its pool is still a completed trial, with a positive
    constraint value (how far over the pool it is): samplers learn from it, fronts skip it."""
    versions = tool_versions()

    def objective(trial: optuna.Trial) -> list[float]:
        point = space.suggest(trial)
        metrics = evaluate(point)
        over = metrics["sram_used_bytes"] - point.sram_pool_bytes
        trial.set_constraint(FEASIBILITY, 0.0 if metrics["fits"] else max(over, 1) / 1024.0)
        trial.set_user_attr("config", point.to_json())
        trial.set_user_attr("metrics", metrics)
        trial.set_user_attr("model_sha256", settings.source_sha256)
        trial.set_user_attr("versions", versions)
        return objective_values(metrics, settings.objectives)

    return objective
