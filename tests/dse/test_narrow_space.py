"""The `narrow_nhwc` point option in the design space: the sampler asks for it on model
studies, the stored trial parameters give the point back (as they do `row_sum_mean`'s), and
one seed kind takes it."""

from __future__ import annotations

from dataclasses import replace

import optuna
import pytest

from dse.config_schema import schema_errors
from dse.space import SMALLEST, DesignPoint, SearchSpace
from dse.stored import POINT_SCHEMA

MODEL = SearchSpace(16 * 1024, 1 << 20, cascader_optional=True, producers=("cascader", "vela"))


@pytest.mark.parametrize("option", ["narrow_nhwc", "row_sum_mean"])
@pytest.mark.parametrize(
    "point",
    [
        DesignPoint(65536),
        DesignPoint(65536, cost_model="vela", always_copy_size=0),
        DesignPoint(65536, enable_cascader=False, buffer_weights=False),
    ],
)
def test_the_sampler_gives_back_the_point_of_its_parameters(
    option: str, point: DesignPoint
) -> None:
    """Both options of the network's form (for `row_sum_mean`, a model with such a mean),
    on and off, cascaded or not; a `vela` point keeps them off."""
    space = replace(MODEL, row_sum_mean=True)
    for chosen in (replace(point, **{option: True}), point, DesignPoint(65536, producer="vela")):
        params = space.params_of(chosen)
        assert params[option] is getattr(chosen, option)
        assert space.suggest(optuna.trial.FixedTrial(params)) == chosen
        assert getattr(chosen.config(), option) is getattr(chosen, option)
        assert option not in chosen.cascader_options()
        assert schema_errors(chosen.to_json(), POINT_SCHEMA) == []


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
