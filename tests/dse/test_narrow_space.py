"""The `narrow_nhwc` point option in the design space: the sampler asks for it on model
studies, the stored trial parameters give the point back, and one seed kind takes it."""

from __future__ import annotations

from dataclasses import replace

import optuna
import pytest

from dse.config_schema import schema_errors
from dse.space import SMALLEST, DesignPoint, SearchSpace
from dse.stored import POINT_SCHEMA

MODEL = SearchSpace(16 * 1024, 1 << 20, cascader_optional=True, producers=("cascader", "vela"))


@pytest.mark.parametrize(
    "point",
    [
        DesignPoint(65536, narrow_nhwc=True),
        DesignPoint(65536, cost_model="vela", always_copy_size=0, narrow_nhwc=True),
        DesignPoint(65536, enable_cascader=False, buffer_weights=False, narrow_nhwc=True),
        DesignPoint(65536),
        DesignPoint(65536, producer="vela"),
    ],
)
def test_the_sampler_gives_back_the_point_of_its_parameters(point: DesignPoint) -> None:
    params = MODEL.params_of(point)
    assert params["narrow_nhwc"] is point.narrow_nhwc
    assert MODEL.suggest(optuna.trial.FixedTrial(params)) == point
    assert point.config().narrow_nhwc is point.narrow_nhwc
    assert "narrow_nhwc" not in point.cascader_options()
    assert schema_errors(point.to_json(), POINT_SCHEMA) == []


def test_a_graph_study_never_asks_for_it() -> None:
    graph = SearchSpace(16 * 1024, 1 << 20)
    assert "narrow_nhwc" not in graph.params_of(DesignPoint(65536))
    assert not any(kind.narrow_nhwc for kind in graph.seed_kinds())


def test_one_seed_kind_takes_it_after_the_smallest_by_the_vela_cost_model() -> None:
    kinds = MODEL.seed_kinds()
    narrow = [i for i, kind in enumerate(kinds) if kind.narrow_nhwc]
    smallest = kinds.index(replace(SMALLEST, cost_model="vela"))
    assert narrow == [smallest + 1]
    assert kinds[smallest + 1] == replace(SMALLEST, cost_model="vela", narrow_nhwc=True)


def test_configs_stored_before_it_read_as_bricks() -> None:
    stored = DesignPoint(65536).to_json()
    del stored["narrow_nhwc"]
    assert schema_errors(stored, POINT_SCHEMA) == []
    assert not DesignPoint(**stored).narrow_nhwc
