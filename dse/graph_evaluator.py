"""Scores design points on a cascader graph JSON with the cascader's own cost model.

This is the evaluator for `dse sweep --graph`: no TVM and no Vela, so a compiler engineer can
sweep cascader options over saved graphs (golden graphs included) in seconds.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

from cascader.core.cascade import CascadeResult, cascade
from cascader.core.graph_json import GraphDocument, load_graph
from cascader.core.options import CascaderOptions
from dse.cache_stats import CacheCounter
from dse.errors import BadInput
from dse.space import DesignPoint


class GraphEvaluator:
    """Scores points on one graph. The graph document must define regions and a home map
    (as `dse graph` and the golden graphs do); the pool size replaces the cascade region's."""

    def __init__(self, document: GraphDocument, source: str, clock_hz: float | None = None) -> None:
        self.source = source
        self.clock_hz = clock_hz
        self.document = document
        if document.regions is None or document.home_map is None:
            raise BadInput(
                f"{source}: the graph has no regions/home_map, so it cannot be scheduled; write "
                "it with `dse graph` or add them as in DESIGN.md"
            )
        self.base_options = self.document.options or CascaderOptions()
        self._run = lru_cache(maxsize=256)(self._cascade)
        # The graph (the front half) is built once, before the first trial: a miss, then hits.
        self.cache = {"front_half": CacheCounter(), "results": CacheCounter()}

    def options_for(self, point: DesignPoint) -> CascaderOptions:
        return dataclasses.replace(self.base_options, **point.cascader_options())

    def _cascade(self, options: CascaderOptions, pool: int) -> CascadeResult:
        regions = dict(self.document.regions)
        region = regions[options.cascade_region]
        regions[options.cascade_region] = dataclasses.replace(region, size=pool)
        return cascade(self.document.graph, regions, self.document.home_map, options)

    def __call__(self, point: DesignPoint) -> dict:
        options = self.options_for(point)
        before = self._run.cache_info().hits
        result = self._run(options, point.sram_pool_bytes)
        self.cache["results"].count(self._run.cache_info().hits > before)
        front = self.cache["front_half"]
        front.count(front.hits + front.misses > 0)
        chosen = result.chosen
        return {
            "source": self.source,
            "scored_by": "cascader",
            "sram_pool_bytes": point.sram_pool_bytes,
            "cascader": {"enabled": True, "options": options.to_json()},
            "fits": chosen.memory_usage <= point.sram_pool_bytes,
            "sram_used_bytes": int(chosen.memory_usage),
            "total_cycles": int(chosen.cycles),
            "npu_cycles": int(chosen.cycles),
            "inference_time_s": chosen.cycles / self.clock_hz if self.clock_hz else None,
            "bytes": {},
            "proposals": len(result.proposals),
            "chosen_index": result.chosen_index,
            "cascader_seconds": result.seconds,
        }


def graph_evaluator(path: Path) -> GraphEvaluator:
    """The evaluator of a graph JSON file."""
    return GraphEvaluator(load_graph(path), str(path))
