"""The `row_sum_mean` point option in the design space: asked for, and seeded, only where
the model has a mean it splits (`dse.mean_rows`), so other models keep the same space (the
stored parameters' round trip: test_narrow_space.py)."""

from __future__ import annotations

from dataclasses import replace

import optuna
import pytest

from cascader.testing.tflite_builder import ModelBuilder
from dse.config_schema import schema_errors
from dse.mean_rows import has_row_sum_mean
from dse.space import SMALLEST, DesignPoint, SearchSpace
from dse.stored import POINT_SCHEMA

BOTH = ("cascader", "vela")
MEAN = SearchSpace(16 * 1024, 1 << 20, cascader_optional=True, producers=BOTH, row_sum_mean=True)
NO_MEAN = replace(MEAN, row_sum_mean=False)


def test_a_model_without_such_a_mean_keeps_its_space() -> None:
    assert "row_sum_mean" not in NO_MEAN.params_of(DesignPoint(65536))
    assert not any(kind.row_sum_mean for kind in NO_MEAN.seed_kinds())
    params = NO_MEAN.params_of(DesignPoint(65536))
    assert NO_MEAN.suggest(optuna.trial.FixedTrial(params)) == DesignPoint(65536)


def test_three_seed_kinds_take_it_where_it_applies() -> None:
    kinds = MEAN.seed_kinds()
    rows = [kind for kind in kinds if kind.row_sum_mean]
    assert [replace(kind, row_sum_mean=False) for kind in rows] == [
        DesignPoint(0, cost_model="vela", always_copy_size=0, max_plan_size=14),
        replace(SMALLEST, cost_model="vela"),
        DesignPoint(0, enable_cascader=False),
    ]
    assert [kind for kind in kinds if not kind.row_sum_mean] == NO_MEAN.seed_kinds()


def test_configs_stored_before_it_read_as_one_sum() -> None:
    stored = DesignPoint(65536).to_json()
    del stored["row_sum_mean"]
    assert schema_errors(stored, POINT_SCHEMA) == []
    assert not DesignPoint(**stored).row_sum_mean


@pytest.mark.parametrize(
    ("shape", "axes", "splits"),
    [((1, 25, 10, 64), (1, 2), True), ((1, 1, 10, 64), (1, 2), False),
     ((1, 8, 8, 16), (3,), False), ((1, 80, 4, 16), (1, 2), False)],
)  # fmt: skip
def test_a_model_has_the_mean_when_it_reduces_h_and_w_within_the_limits(
    tmp_path, shape: tuple, axes: tuple, splits: bool
) -> None:
    b = ModelBuilder(0, 2, name="m")
    b.output(b.mean(b.input(shape), axes=axes, keep_dims=True))
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    assert has_row_sum_mean(str(path), "test") is splits


def test_a_mean_much_smaller_than_the_largest_feature_map_is_left_whole(tmp_path) -> None:
    """A global pool after a network's large early maps never sets its floor: not asked for."""
    b = ModelBuilder(0, 2, name="m")
    pooled = b.max_pool2d(b.input((1, 32, 32, 16)), pool=2, stride=2)
    b.output(b.mean(b.max_pool2d(pooled, pool=2, stride=2), axes=(1, 2), keep_dims=True))
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    assert not has_row_sum_mean(str(path), "small")
