"""Picks the evaluator a study's settings call for; module-level so worker processes can
rebuild it from the stored settings alone."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from cascader.estimate import Estimate
from cascader.memo import Memo, module_memo
from dse.cache_stats import CacheCounter
from dse.errors import BadInput
from dse.graph_evaluator import graph_evaluator
from dse.objective import Evaluator, MemoizedEvaluator
from dse.space import DesignPoint
from dse.study import StudySettings, source_sha256
from dse.vela_evaluator import VelaEvaluator

if TYPE_CHECKING:
    from cascader.pipeline import PreparedModel


def source_file(settings: StudySettings) -> Path:
    """The study's model or graph file, checked to be the very file the study was made for."""
    path = Path(settings.source_path)
    if not path.is_file():
        raise BadInput(
            f"{settings.source_kind} {path} of this study is not on this machine; copy it to "
            "that path"
        )
    if source_sha256(settings.source_kind, path) != settings.source_sha256:
        raise BadInput(
            f"{path} has changed since the study was made (sha256 differs); restore it or "
            "start a new study"
        )
    return path


# Per process: each model's front half (TFLite import, NPU partition, legalize), which does
# not depend on the accelerator, by the model's sha256 (a pure function of the model's bytes),
# so a workload's studies of one model on several NPU configurations import it once.
# Bounded: a workload has a few models.
_FRONT_HALVES: Memo[str, object] = module_memo("dse.evaluators front halves by sha256", 8)


class ModelEvaluator(MemoizedEvaluator):
    """Scores points on a .tflite model: the cascader's schedule of the point, costed by
    Vela's performance model. One `Session` per process holds the model's front half, its
    proposals and scores."""

    def __init__(self, settings: StudySettings, path: Path) -> None:
        super().__init__()
        from cascader.estimate import Device
        from cascader.pipeline import Session

        self.settings = settings
        self.path = path
        device = Device(settings.accelerator, settings.system_config, settings.memory_mode,
                        settings.vela_config)  # fmt: skip
        # Names and the model are checked here, before a study is created or touched.
        device.memory(settings.sram_max)
        data = path.read_bytes() if _HANDED else b""
        handed = _HANDED.lookup((hashlib.sha256(data).hexdigest(), settings.accelerator))
        if handed is not None:  # checked where it was prepared: no TVM, no front half here
            self.session = Session(data, device, handed, name=path.name)
        else:
            self.session = Session(path, device, _prepared(path, settings.accelerator))
        if not self.session.prepared.network.graph.parts:
            raise BadInput(f"{path}: no operator runs on the NPU, so there is nothing to explore")

    @property
    def cache(self) -> dict[str, CacheCounter]:
        """Real hits and misses: of the session's cascader runs (proposals generated once
        per option set for the study's largest pool, chosen per pool), of its scores per
        proposal, and of the points this evaluator scored."""
        cascades = [scheduler.cascades for scheduler in self.session.schedulers()]
        scores = self.session.scores
        proposals = CacheCounter(sum(c.hits for c in cascades), sum(c.misses for c in cascades))
        return {
            "proposals": proposals,
            "scores": CacheCounter(scores.hits, scores.misses),
            "results": self._results,
        }

    def _estimate(self, point: DesignPoint) -> Estimate:
        """The point's estimate; a point the flow cannot schedule (no proposal fits, or one
        the lowering cannot express) is an infeasible point with its reason."""
        from cascader.ir.errors import ScheduleError

        config = point.config(self.settings.sram_max)
        try:
            # Vela's allocator prints warnings on stdout; keep stdout for `--json` output.
            with contextlib.redirect_stdout(io.StringIO()):
                result = self.session.score(config)
        except ScheduleError as error:
            return Estimate(
                sram_pool_bytes=point.sram_pool_bytes,
                options=config.options,
                fits=False,
                sram_used_bytes=None,
                total_cycles=None,
                source=str(self.path),
                unscheduled=str(error),
            )
        return result.with_source(str(self.path))


def _prepared(path: Path, accelerator: str) -> PreparedModel:
    """The model at `path` read, checked and prepared for `accelerator` (its front half kept
    in `_FRONT_HALVES`)."""
    from cascader.frontend.legalize import LegalizeError
    from cascader.frontend.passes import front_half
    from cascader.frontend.tflite_import import load_tflite
    from cascader.pipeline import prepare_model

    try:
        model = load_tflite(path)
        sha = hashlib.sha256(model).hexdigest()
        half = _FRONT_HALVES.lookup(sha)
        if half is None:
            half = front_half(model)
            _FRONT_HALVES.keep(sha, half)
        return prepare_model(model, accelerator, half)
    except LegalizeError as error:
        raise BadInput(f"{path}: {error}") from None


# Per scoring worker: the prepared models the sweep's process handed over (`handover`), by
# the model's sha256 and accelerator (what preparing is a pure function of), so the worker's
# evaluators neither import TVM nor run the front half and the graph build again. Bounded: a
# sweep hands over one model.
_HANDED: Memo[tuple[str, str], PreparedModel] = module_memo("dse.evaluators handed over", 4)


def handover(evaluate: Evaluator) -> bytes | None:
    """What a scoring worker needs to score `evaluate`'s model points without preparing the
    model itself (`take_over`): its prepared model, pickled; None for an evaluator of no
    model (a graph, or Vela's producer alone)."""
    found = evaluate
    if isinstance(evaluate, ProducerEvaluator):
        found = evaluate.by_producer.get("cascader")
    if not isinstance(found, ModelEvaluator):
        return None
    prepared = found.session.prepared
    # A copy without the scheduler the sweep's session built, nor the other layout's network
    # (`PreparedModel.variant`): the worker keeps its own.
    return pickle.dumps((found.settings.accelerator, dataclasses.replace(prepared)))


def take_over(payload: bytes) -> None:
    """Keep a prepared model `handover` made, for this process's evaluators of its model."""
    accelerator, prepared = pickle.loads(payload)
    _HANDED.keep((prepared.sha256, accelerator), prepared)


def model_session(settings: StudySettings):
    """The session of a model study's model on its device (checked as an evaluator is)."""
    return ModelEvaluator(settings, source_file(settings)).session


class ProducerEvaluator:
    """Scores each point with its producer's evaluator (a study of both producers)."""

    def __init__(self, by_producer: dict[str, Evaluator]) -> None:
        self.by_producer = by_producer

    @property
    def cache(self) -> dict[str, CacheCounter]:
        return {
            name: counter
            for evaluate in self.by_producer.values()
            for name, counter in getattr(evaluate, "cache", {}).items()
        }

    def __call__(self, point: DesignPoint) -> Estimate:
        return self.by_producer[point.producer](point)


def make_evaluator(settings: StudySettings) -> Evaluator:
    """The study's evaluator: of its graph, or of its model with each of its producers."""
    path = source_file(settings)
    if settings.source_kind == "graph":
        return graph_evaluator(path)
    makers = {"cascader": ModelEvaluator, "vela": VelaEvaluator}
    by_producer = {name: makers[name](settings, path) for name in settings.producers}
    if len(by_producer) == 1:
        return next(iter(by_producer.values()))
    return ProducerEvaluator(by_producer)
