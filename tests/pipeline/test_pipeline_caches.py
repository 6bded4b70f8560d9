"""What a session keeps between points of a sweep changes no number: option sets that make
the same proposals share one cascader run, a pool that reuses a scored proposal gets the
score computed afresh, the caches count real lookups, and a model file is validated."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from sessions import prepared_model

from cascader.core.cascade import cascade
from cascader.core.options import CascaderOptions
from cascader.estimate import Device, PointConfig
from cascader.ethosu.graph import graph_document
from cascader.ethosu.memory import system_memory
from cascader.frontend.errors import ModelError
from cascader.frontend.tflite_import import load_tflite
from cascader.pipeline import Session, prepare_model
from cascader.schedule.point_scheduler import proposal_options

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")


def test_options_without_striping_make_the_proposals_of_their_normal_form() -> None:
    prepared = prepared_model(load_tflite(EXAMPLE), U55[0])
    memory = system_memory(*U55, 512 * 1024)

    def run(options: CascaderOptions) -> list[dict]:
        document = graph_document(prepared.network.graph, memory, options)
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


@pytest.mark.caches
def test_a_score_reused_for_another_pool_is_that_pools_score() -> None:
    options = CascaderOptions(enable_striping=True)
    pools = (256 * 1024, 256 * 1024 + 4096, 2 * 1024 * 1024)
    region = max(pools)
    session = Session(EXAMPLE, Device(*U55))
    warm = [session.score(PointConfig(pool, options, region)) for pool in pools]
    assert len(session.scores) < len(pools)  # at least one pool reused a score
    assert session.scores.hits == len(pools) - len(session.scores)
    assert session.scheduler.cascades.misses == 1  # one cascader run served every pool
    for pool, found in zip(pools, warm, strict=True):
        result = Session(EXAMPLE, Device(*U55)).score(PointConfig(pool, options, region))
        assert found == result
        assert found.to_json() == result.to_json()


@pytest.mark.caches
def test_a_pool_under_a_prebuffered_schedule_gets_its_fallbacks_score() -> None:
    """A schedule whose first weight copies run under the plan before keeps a smaller fallback
    for pools it does not fit; such a pool is scored as the fallback even after the schedule
    itself was scored at a larger pool (a step down from a front point finds the fallback)."""
    options = CascaderOptions(enable_striping=True)
    region = 4 << 20
    session = Session(EXAMPLE, Device(*U55))
    for pool in range(64 * 1024, 256 * 1024, 8 * 1024):
        session.score(PointConfig(pool, options, region))
    own = min(own for least, own in session.scheduler.needs.values() if least < own)
    assert session.score(PointConfig(own, options, region)).sram_used_bytes == own
    warm = session.score(PointConfig(own - 16, options, region))
    cold = Session(EXAMPLE, Device(*U55)).score(PointConfig(own - 16, options, region))
    assert warm.fits and warm.to_json() == cold.to_json()


def test_a_model_file_is_validated_as_it_is_read(tmp_path: Path) -> None:
    model = tmp_path / "model.tflite"
    shutil.copyfile(EXAMPLE, model)
    first = load_tflite(model)
    model.write_bytes(first[:1000])
    with pytest.raises(ModelError, match="truncated or corrupt"):
        load_tflite(model)
    model.write_bytes(first)
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
    shared = prepare_model(load_tflite(EXAMPLE), U55[0]).network.graph

    def run(options: CascaderOptions, fresh: bool) -> list[dict]:
        graph = prepare_model(load_tflite(EXAMPLE), U55[0]).network.graph if fresh else shared
        document = graph_document(graph, memory, options)
        found = cascade(document.graph, document.regions, document.home_map, document.options)
        return [p.to_json() for p in found.proposals]

    warm = [run(options, fresh=False) for options in option_sets]
    cold = [run(options, fresh=True) for options in option_sets]
    assert warm == cold
