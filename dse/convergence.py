"""How a study's front grew: after each completed trial, the hypervolume of the front found so
far and how many of Vela's points it matches, by trial number and by wall seconds.

The hypervolume is the area of the (SRAM used, cycles) plane the front dominates inside a
reference box: from 0 to 1.1 times the largest SRAM and cycles of any feasible trial, as a
share of the box (1.0 would be a point using no SRAM in no cycles)."""

from __future__ import annotations

from dataclasses import dataclass

from optuna.trial import FrozenTrial, TrialState

from dse.vela_points import count_matched

__all__ = ["History", "front_history", "hypervolume"]

_MARGIN = 1.1


@dataclass(frozen=True)
class History:
    """Per completed trial, in trial-number order (`by_number`) and in completion order
    (`by_time`): (trial number, seconds since the study's first trial started, hypervolume
    share, Vela points matched)."""

    by_number: tuple[tuple[int, float, float, int], ...]
    by_time: tuple[tuple[int, float, float, int], ...]
    vela_points: int

    def first_match_of_all(self) -> tuple[int, float] | None:
        """(trial number, seconds) at which the front first matched every Vela point, in
        completion order; None when it never did (or there are no Vela points)."""
        if not self.vela_points:
            return None
        for number, seconds, _, hits in self.by_time:
            if hits == self.vela_points:
                return number, seconds
        return None


def _point(trial: FrozenTrial) -> tuple[float, float] | None:
    metrics = trial.user_attrs.get("metrics", {})
    if not metrics.get("fits") or metrics.get("total_cycles") is None:
        return None
    return float(metrics["sram_used_bytes"]), float(metrics["total_cycles"])


def hypervolume(points: list[tuple[float, float]], box: tuple[float, float]) -> float:
    """The share of the box [0, box[0]] x [0, box[1]] the points dominate (both minimised)."""
    area, best = 0.0, box[1]
    for sram, cycles in sorted(points):
        if sram >= box[0] or cycles >= best:
            continue
        area += (box[0] - sram) * (best - cycles)  # the strip below the faster points
        best = cycles
    return area / (box[0] * box[1])


def front_history(trials: list[FrozenTrial], vela: list[dict]) -> History | None:
    """The study's convergence; None when no trial fits."""
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.datetime_complete]
    feasible = [p for p in map(_point, done) if p is not None]
    if not feasible:
        return None
    box = (_MARGIN * max(p[0] for p in feasible), _MARGIN * max(p[1] for p in feasible))
    start = min(t.datetime_start or t.datetime_complete for t in done)

    def walk(ordered: list[FrozenTrial]) -> tuple[tuple[int, float, float, int], ...]:
        points: list[tuple[float, float]] = []
        rows = []
        for trial in ordered:
            point = _point(trial)
            if point is not None:
                points = _front([*points, point])
            front = [{"sram_used_bytes": s, "total_cycles": c} for s, c in points]
            seconds = (trial.datetime_complete - start).total_seconds()
            rows.append(
                (trial.number, seconds, hypervolume(points, box), count_matched(front, vela))
            )
        return tuple(rows)

    by_number = walk(sorted(done, key=lambda t: t.number))
    by_time = walk(sorted(done, key=lambda t: (t.datetime_complete, t.number)))
    return History(by_number, by_time, len(vela))


def _front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other one dominates, by SRAM."""
    kept: list[tuple[float, float]] = []
    for point in sorted(set(points)):
        if not kept or point[1] < kept[-1][1]:
            kept.append(point)
    return kept
