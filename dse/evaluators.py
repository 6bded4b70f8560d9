"""Picks the evaluator a study's settings call for; module-level so worker processes can
rebuild it from the stored settings alone."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from dse.cache_stats import CacheCounter
from dse.errors import BadInput
from dse.graph_evaluator import graph_evaluator
from dse.objective import Evaluator
from dse.space import DesignPoint
from dse.study import StudySettings, file_sha256


def source_file(settings: StudySettings) -> Path:
    """The study's model or graph file, checked to be the very file the study was made for."""
    path = Path(settings.source_path)
    if not path.is_file():
        raise BadInput(
            f"{settings.source_kind} {path} of this study is not on this machine; copy it to "
            "that path"
        )
    if file_sha256(path) != settings.source_sha256:
        raise BadInput(
            f"{path} has changed since the study was made (sha256 differs); restore it or "
            "start a new study"
        )
    return path


class ModelEvaluator:
    """Scores points on a .tflite model with the flow's estimate: the cascader's schedule of
    the point, costed by Vela's performance model. The flow keeps the model's front half
    (import, partition, legalize, graph) per process; scored points are memoized here."""

    def __init__(self, settings: StudySettings, path: Path) -> None:
        from cascader.ethosu.memory import system_memory
        from cascader.flow.frontend import load_tflite
        from cascader.flow.legalize import LegalizeError
        from cascader.flow.pipeline import front_half

        self.settings = settings
        self.path = path
        # Names and the model are checked here, before a study is created or touched.
        system_memory(
            settings.accelerator,
            settings.system_config,
            settings.memory_mode,
            settings.sram_max,
            settings.vela_config,
        )
        try:
            front = front_half(load_tflite(path), settings.accelerator)
        except LegalizeError as error:
            raise BadInput(f"{path}: {error}") from None
        if not front.network.graph.parts:
            raise BadInput(f"{path}: no operator runs on the NPU, so there is nothing to explore")
        self._scored: dict[DesignPoint, dict] = {}
        self._proposed: set = set()  # option sets, as their proposals go
        self.cache = {
            "front_half": CacheCounter(),
            "proposals": CacheCounter(),
            "results": CacheCounter(),
        }

    def __call__(self, point: DesignPoint) -> dict:
        front = self.cache["front_half"]
        front.count(front.hits + front.misses > 0)
        found = self._scored.get(point)
        self.cache["results"].count(found is not None)
        if found is None:
            found = self._estimate(point)
            self._scored[point] = found
        return found

    def _estimate(self, point: DesignPoint) -> dict:
        """The point's estimate object; a point the flow cannot schedule (no proposal fits,
        or one the lowering cannot express) is an infeasible point with its reason."""
        from cascader.core.options import CascaderOptions
        from cascader.flow.pipeline import estimate, proposal_options
        from cascader.flow.schedule import ScheduleError

        s = self.settings
        options = CascaderOptions(**point.cascader_options()) if point.enable_cascader else None
        if options is not None:
            # Proposals are generated once per option set for the study's largest pool and
            # chosen per pool (cascader.flow.pipeline.proposals caches them; option sets
            # that make the same proposals share them).
            key = proposal_options(options)
            self.cache["proposals"].count(key in self._proposed)
            self._proposed.add(key)
        try:
            # Vela's allocator prints warnings on stdout; keep stdout for `--json` output.
            with contextlib.redirect_stdout(io.StringIO()):
                result = estimate(
                    str(self.path),
                    s.accelerator,
                    s.system_config,
                    s.memory_mode,
                    point.sram_pool_bytes,
                    options,
                    s.vela_config,
                    proposal_region_bytes=s.sram_max,
                )
        except ScheduleError as error:
            return {
                "source": str(self.path),
                "scored_by": "vela",
                "sram_pool_bytes": point.sram_pool_bytes,
                "cascader": {
                    "enabled": options is not None,
                    "options": options.to_json() if options is not None else {},
                },
                "fits": False,
                "unscheduled": str(error),
                "sram_used_bytes": None,
                "total_cycles": None,
                "bytes": {},
            }
        return {**result.to_json(), "source": str(self.path), "scored_by": "vela"}


def make_evaluator(settings: StudySettings) -> Evaluator:
    path = source_file(settings)
    if settings.source_kind == "graph":
        return graph_evaluator(path)
    return ModelEvaluator(settings, path)
