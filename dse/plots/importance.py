"""Which sampled parameters move each objective most (Optuna's importance evaluator)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import optuna
from optuna.trial import TrialState

from dse.plots.figure import Plot, save

__all__ = ["importance_plot", "importances"]


def importances(study: optuna.Study, objectives: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Parameter importances per objective; empty when there are too few trials to say."""
    scored = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if all(math.isfinite(v) for v in t.values)
    ]
    if len(scored) < 4:
        return {}
    # Unscheduled points (infinite objectives) would swamp the analysis: judge the rest.
    finite = optuna.create_study(directions=study.directions)
    finite.add_trials(scored)
    found = {}
    for index, name in enumerate(objectives):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found[name] = optuna.importance.get_param_importances(
                    finite, target=lambda t, i=index: t.values[i]
                )
        except (RuntimeError, ValueError, ZeroDivisionError):
            continue  # e.g. every trial has the same parameters
    return found


def importance_plot(found: dict[str, dict[str, float]], out: Path) -> Plot | None:
    if not found:
        return None
    params = sorted({p for imp in found.values() for p in imp})
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(params) * len(found) + 1.5))
    width = 0.8 / len(found)
    for k, (objective, imp) in enumerate(found.items()):
        ax.barh(
            [i + k * width for i in range(len(params))],
            [imp.get(p, 0.0) for p in params],
            height=width,
            label=objective,
        )
    ax.set_yticks([i + width * (len(found) - 1) / 2 for i in range(len(params))], params)
    ax.set_xlabel("importance")
    ax.legend()
    ax.set_title("Parameter importances")
    return save(fig, out, "importances", "Parameter importances per objective")
