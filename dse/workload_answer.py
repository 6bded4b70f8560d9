"""The answer to a workload's question, from its studies' fronts: per NPU configuration, the
smallest SRAM at which every model meets its latency budget (the models run one at a time
and share the arena, so a workload point's SRAM is the largest its models use, each model
taking its fastest schedule within it), and the configuration with the fewest MACs that
meets every budget within a given SRAM."""

from __future__ import annotations

from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from dse.front import pareto_front
from dse.study import StudySettings, load_settings
from dse.workload import WORKLOAD_ATTR


@dataclass(frozen=True)
class ModelPoint:
    """One front point of a model on a configuration."""

    sram: int
    time_s: float
    cycles: float
    producer: str
    trial: int


@dataclass(frozen=True)
class ModelFront:
    """A model's front on one configuration and its budget (None: none)."""

    model: str
    budget_s: float | None
    weight: float
    points: tuple[ModelPoint, ...]
    study: str

    def fastest_within(self, sram: int) -> ModelPoint | None:
        within = [p for p in self.points if p.sram <= sram]
        return min(within, key=lambda p: (p.time_s, p.sram), default=None)

    def need(self) -> int | None:
        """The least SRAM at which the model meets its budget (no budget: at which it runs);
        None when no point explored meets it."""
        ok = [p.sram for p in self.points if self.budget_s is None or p.time_s <= self.budget_s]
        return min(ok, default=None)

    def ratio(self, point: ModelPoint | None) -> float:
        """Latency over budget (inf without a point; 0 for a model without a budget)."""
        if point is None:
            return float("inf")
        return 0.0 if self.budget_s is None else point.time_s / self.budget_s


@dataclass(frozen=True)
class ConfigAnswer:
    """One NPU configuration's answer: `sram` the smallest SRAM meeting every budget (None:
    none explored does), with each model's point there; without one, each model's fastest
    point overall and `missing` the models that meet their budget nowhere."""

    accelerator: str
    system_config: str
    memory_mode: str
    fronts: tuple[ModelFront, ...]
    sram: int | None
    points: dict[str, ModelPoint | None]
    missing: tuple[str, ...]

    @property
    def macs(self) -> int:
        """MACs per cycle, as the accelerator's name gives them (ethos-u55-128: 128)."""
        return int(self.accelerator.rsplit("-", 1)[1])

    @property
    def label(self) -> str:
        return f"{self.accelerator} ({self.system_config}, {self.memory_mode})"

    def worst_ratio(self) -> float:
        return max((f.ratio(self.points[f.model]) for f in self.fronts), default=float("inf"))

    def curve(self) -> list[tuple[int, float]]:
        """The worst model's latency / budget against SRAM, at every SRAM where it changes."""
        srams = sorted({p.sram for f in self.fronts for p in f.points})
        return [
            (s, max(f.ratio(f.fastest_within(s)) for f in self.fronts))
            for s in srams
            if all(f.fastest_within(s) is not None for f in self.fronts)
        ]


def config_answer(
    accelerator: str, system: str, mode: str, fronts: list[ModelFront]
) -> ConfigAnswer:
    needs = {f.model: f.need() for f in fronts}
    missing = tuple(m for m, n in needs.items() if n is None)
    if missing:
        largest = max((p.sram for f in fronts for p in f.points), default=0)
        points = {f.model: f.fastest_within(largest) for f in fronts}
        return ConfigAnswer(accelerator, system, mode, tuple(fronts), None, points, missing)
    sram = max(needs.values())
    points = {f.model: f.fastest_within(sram) for f in fronts}
    return ConfigAnswer(accelerator, system, mode, tuple(fronts), sram, points, ())


def model_front(name: str, attr: dict, trials: list[FrozenTrial]) -> ModelFront:
    """The front of study `name` (workload attr `attr`) from its completed `trials`."""
    points = []
    for t in pareto_front(None, trials):
        m = t.user_attrs["metrics"]
        points.append(ModelPoint(int(m["sram_used_bytes"]), float(m["inference_time_s"]),
                                 float(m["total_cycles"]), m.get("producer", "cascader"),
                                 t.number))  # fmt: skip
    return ModelFront(attr["model"], attr["budget_s"], attr["weight"], tuple(points), name)


def answers_of(fronts: list[tuple[StudySettings, ModelFront]]) -> list[ConfigAnswer]:
    """Each configuration's answer from its models' fronts, in the order they come."""
    by_config: dict[tuple[str, str, str], list[ModelFront]] = {}
    for s, front in fronts:
        by_config.setdefault((s.accelerator, s.system_config, s.memory_mode), []).append(front)
    return [config_answer(*key, group) for key, group in by_config.items()]


def workload_answers(studies: list[optuna.Study]) -> list[ConfigAnswer]:
    """Each configuration's answer, read from the studies' storage."""
    fronts = []
    for study in studies:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        front = model_front(study.study_name, study.user_attrs[WORKLOAD_ATTR], trials)
        fronts.append((load_settings(study), front))
    return answers_of(fronts)


def fewest_macs(answers: list[ConfigAnswer], max_sram: int | None) -> ConfigAnswer | None:
    """The configuration with the fewest MACs meeting every budget within `max_sram` (any
    SRAM when None); ties: the smaller SRAM."""
    meeting = [
        a for a in answers if a.sram is not None and (max_sram is None or a.sram <= max_sram)
    ]
    return min(meeting, key=lambda a: (a.macs, a.sram, a.label), default=None)


def closest(answers: list[ConfigAnswer], max_sram: int | None) -> ConfigAnswer | None:
    """When none meets the budgets: the configuration whose worst model comes nearest its
    budget within `max_sram`."""

    def worst(a: ConfigAnswer) -> float:
        limit = (
            max_sram
            if max_sram is not None
            else max((p.sram for f in a.fronts for p in f.points), default=0)
        )
        return max(f.ratio(f.fastest_within(limit)) for f in a.fronts)

    return min(answers, key=lambda a: (worst(a), a.macs), default=None)
