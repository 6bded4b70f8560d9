"""Cascader core benchmarks: plan + proposal generation on golden and synthetic graphs.

Run: pytest benchmarks/bench_core.py --benchmark-only
Every round loads a fresh graph, so the parts' memoised costs start cold.
"""

import os
import sys
from pathlib import Path

import pytest

from cascader.core import cascade, load_graph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import mobilenet_like

SHARED = Path(
    os.environ.get("CASCADER_SHARED", Path(__file__).resolve().parents[1].parent / "shared")
)
GOLDEN = sorted((SHARED / "golden").glob("*.json")) if (SHARED / "golden").is_dir() else []


def _run(document):
    return cascade(document.graph, document.regions, document.home_map, document.options)


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden(benchmark, path):
    benchmark.group = "golden"
    result = benchmark.pedantic(
        _run, setup=lambda: ((load_graph(path),), {}), rounds=3, iterations=1
    )
    assert result.proposals


@pytest.mark.parametrize("parts", [30, 60, 120])
def test_mobilenet_like(benchmark, parts):
    benchmark.group = "synthetic"
    result = benchmark.pedantic(
        _run, setup=lambda: ((mobilenet_like(parts),), {}), rounds=3, iterations=1
    )
    assert result.proposals
