"""Cascader core benchmarks: plan + proposal generation on golden and synthetic graphs.

Run: pytest benchmarks/bench_core.py --benchmark-only
Every round loads a fresh graph, so the parts' memoised costs start cold.
The "striping" group is issue #6's sweep trial: MobileNetV2 with the striping options a
trial may draw, multi-dimensional striping being the expensive one.
"""

import dataclasses
import os
import sys
from pathlib import Path

import pytest

from cascader.core import cascade
from cascader.ethosu.graph_json import load_graph

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


MOBILENET = SHARED / "golden" / "mobilenet_v2_100_224_s1_p1024k.json"


@pytest.mark.skipif(not MOBILENET.exists(), reason=f"no {MOBILENET}")
@pytest.mark.parametrize(
    ("multi_dimensional", "stripe_factors", "cost_model"),
    [(True, 5, "tvm"), (True, 8, "tvm"), (False, 5, "tvm"), (False, 5, "vela")],
)
def test_mobilenet_striping(benchmark, multi_dimensional, stripe_factors, cost_model):
    benchmark.group = "striping"

    def setup():
        document = load_graph(MOBILENET)
        document.options = dataclasses.replace(
            document.options,
            enable_multi_dimensional_striping=multi_dimensional,
            stripe_factors=stripe_factors,
            cost_model=cost_model,
        )
        return (document,), {}

    result = benchmark.pedantic(_run, setup=setup, rounds=3, iterations=1)
    assert result.proposals
