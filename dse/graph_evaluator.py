"""Scores design points on a cascader graph JSON with the cascader's own cost model.

This is the evaluator for `dse sweep --graph`: no TVM and no Vela, so a compiler engineer can
sweep cascader options over saved graphs (golden graphs included) in seconds.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cascader.core.cascade import CascadeResult, cascade
from cascader.core.graph_json import GraphDocument
from cascader.core.options import CascaderOptions
from cascader.estimate import Estimate
from cascader.ethosu.graph_json import load_graph
from cascader.memo import Memo
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
        self._runs: Memo[tuple[CascaderOptions, int], CascadeResult] = Memo(
            "GraphEvaluator.runs", 256
        )

    def options_for(self, point: DesignPoint) -> CascaderOptions:
        return dataclasses.replace(self.base_options, **point.cascader_options())

    def _cascade(self, options: CascaderOptions, pool: int) -> CascadeResult:
        regions = dict(self.document.regions)
        region = regions[options.cascade_region]
        regions[options.cascade_region] = dataclasses.replace(region, size=pool)
        return cascade(self.document.graph, regions, self.document.home_map, options)

    @property
    def cache(self) -> dict[str, CacheCounter]:
        """Real hits and misses of the cascader runs this evaluator keeps."""
        return {"results": CacheCounter(self._runs.hits, self._runs.misses)}

    def __call__(self, point: DesignPoint) -> Estimate:
        options = self.options_for(point)
        key = (options, point.sram_pool_bytes)
        result = self._runs.lookup(key)
        if result is None:
            result = self._cascade(options, point.sram_pool_bytes)
            self._runs.keep(key, result)
        chosen = result.chosen
        return Estimate(
            sram_pool_bytes=point.sram_pool_bytes,
            options=options,
            fits=chosen.memory_usage <= point.sram_pool_bytes,
            sram_used_bytes=int(chosen.memory_usage),
            total_cycles=int(chosen.cycles),
            scored_by="cascader",
            source=self.source,
            npu_cycles=int(chosen.cycles),
            inference_time_s=chosen.cycles / self.clock_hz if self.clock_hz else None,
            proposals=len(result.proposals),
            chosen_index=result.chosen_index,
            cascader_seconds=result.seconds,
        )


def graph_evaluator(path: Path) -> GraphEvaluator:
    """The evaluator of a graph JSON file."""
    return GraphEvaluator(load_graph(path), str(path))
