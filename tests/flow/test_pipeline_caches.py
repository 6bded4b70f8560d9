"""What the flow keeps between points of a sweep changes no number: option sets that make the
same proposals share one cascader run, a pool that reuses a scored proposal gets the score
computed afresh, and a model file is validated again once it changes."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from cascader.core.cascade import cascade
from cascader.core.options import CascaderOptions
from cascader.ethosu.memory import system_memory
from cascader.flow import frontend, pipeline
from cascader.flow.cascader_graph import graph_document
from cascader.flow.errors import ModelError
from cascader.flow.frontend import load_tflite
from cascader.flow.pipeline import estimate, front_half, proposal_options

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")


def _clear_point_caches() -> None:
    for cache in (pipeline._CASCADES, pipeline._SCHEDULES, pipeline._SCORES):
        cache.clear()


def test_options_without_striping_make_the_proposals_of_their_normal_form() -> None:
    front = front_half(load_tflite(EXAMPLE), U55[0])
    memory = system_memory(*U55, 512 * 1024)

    def run(options: CascaderOptions) -> list[dict]:
        document = graph_document(front.network.graph, memory, options)
        found = cascade(document.graph, document.regions, document.home_map, document.options)
        return [p.to_json() for p in found.proposals]

    flat = CascaderOptions(enable_striping=False, max_plan_size=4)
    normal = run(proposal_options(flat))
    variants = (
        replace(flat, stripe_factors=2),
        replace(flat, stripe_factors=8, enable_multi_dimensional_striping=True),
    )
    for variant in variants:
        assert proposal_options(variant) == proposal_options(flat)
        assert run(variant) == normal
    striped = replace(flat, enable_striping=True, stripe_factors=3)
    assert proposal_options(striped) == striped


def test_a_score_reused_for_another_pool_is_that_pools_score() -> None:
    options = CascaderOptions(enable_striping=True)
    pools = (256 * 1024, 256 * 1024 + 4096, 2 * 1024 * 1024)
    region = max(pools)
    _clear_point_caches()
    warm = [estimate(str(EXAMPLE), *U55, pool, options, proposal_region_bytes=region)
            for pool in pools]  # fmt: skip
    assert len(pipeline._SCORES) < len(pools)  # at least one pool reused a score
    for pool, found in zip(pools, warm, strict=True):
        _clear_point_caches()
        cold = estimate(str(EXAMPLE), *U55, pool, options, proposal_region_bytes=region)
        assert found == cold
        assert found.to_json() == cold.to_json()


def test_a_changed_model_file_is_read_and_validated_again(tmp_path: Path) -> None:
    model = tmp_path / "model.tflite"
    shutil.copyfile(EXAMPLE, model)
    first = load_tflite(model)
    assert load_tflite(model) is first  # unchanged: not read again
    model.write_bytes(first[:1000])
    with pytest.raises(ModelError, match="truncated or corrupt"):
        load_tflite(model)
    model.write_bytes(first)
    assert load_tflite(model) == first
    frontend._LOADED.clear()
    assert load_tflite(model) == first


def test_a_cascader_run_after_others_makes_the_proposals_of_a_fresh_graph() -> None:
    """Parts, tensors and the graph keep what is pure in them from run to run (input stripe
    configs, buffer sizes, the plan contexts' system caches): runs on a graph that served
    other option sets first give the proposals the same options give on a graph built
    afresh."""
    memory = system_memory(*U55, 512 * 1024)
    striped = CascaderOptions(enable_striping=True)
    multi = replace(striped, enable_multi_dimensional_striping=True)
    option_sets = [
        replace(striped, stripe_factors=2),
        replace(striped, stripe_factors=4, always_copy_size=0),
        replace(multi, stripe_factors=3, cost_model="vela"),
        replace(multi, stripe_factors=4, always_copy_size=0),
    ]

    def run(options: CascaderOptions, fresh: bool) -> list[dict]:
        if fresh:
            pipeline._FRONTS.clear()
        graph = front_half(load_tflite(EXAMPLE), U55[0]).network.graph
        document = graph_document(graph, memory, options)
        found = cascade(document.graph, document.regions, document.home_map, document.options)
        return [p.to_json() for p in found.proposals]

    pipeline._FRONTS.clear()
    warm = [run(options, fresh=False) for options in option_sets]
    cold = [run(options, fresh=True) for options in option_sets]
    assert warm == cold
