"""The SRAM lower bound: no schedule the flow builds needs less, it is reached where the
tensors held whole meet an op's smallest stripe, and it is 0 where the arena is not in SRAM."""

from __future__ import annotations

from dataclasses import replace

import pytest
from model_cases import MODEL_NAMES, model_path
from proofs import small_options
from sessions import session

from cascader.estimate import Estimate, PointConfig
from cascader.ethosu.defaults import POINT_OPTIONS
from cascader.testing.networks import COMPOSITIONS, single_op_model
from cascader.testing.tflite_builder import ModelBuilder
from dse.space import SearchSpace

SHARED_SRAM = {
    "ethos-u55-256": ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65-256": ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram"),
}
TINY_POOL = 256  # under every schedule's need: each kind is scored at its smallest schedule


def _smallest_schedules(model: bytes | str, device: tuple[str, str, str]) -> list[Estimate]:
    """A sweep's seed kinds at a pool none fits, so each is its smallest schedule."""
    found = []
    for kind in SearchSpace(TINY_POOL, TINY_POOL, cascader_optional=True).seed_kinds():
        config = replace(kind, sram_pool_bytes=TINY_POOL).config(1 << 22)
        found.append(session(model, *device).score(config))
    return found


@pytest.mark.parametrize("accelerator", sorted(SHARED_SRAM))
@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_no_smallest_schedule_of_a_composition_needs_less(name: str, accelerator: str) -> None:
    model = COMPOSITIONS[name]().build()
    for result in _smallest_schedules(model, SHARED_SRAM[accelerator]):
        assert result.sram_lower_bound_bytes is not None
        assert 0 < result.sram_lower_bound_bytes <= result.sram_used_bytes


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_no_smallest_schedule_of_a_shared_model_needs_less(name: str) -> None:
    for result in _smallest_schedules(str(model_path(name)), SHARED_SRAM["ethos-u55-256"]):
        assert 0 < result.sram_lower_bound_bytes <= result.sram_used_bytes


def test_a_convolution_holds_its_input_and_output_whole() -> None:
    """One convolution from a (1, 16, 16, 8) input to a (1, 16, 16, 16) output: both are the
    model's, so both are whole while it runs and it needs nothing beside them; its output
    may be laid over the input it consumes, so together they take at least the larger. Its
    smallest schedule, in row stripes, does lay it so."""
    model = single_op_model("CONV_2D", shape=(1, 16, 16, 8), filters=16)
    found = session(model, *SHARED_SRAM["ethos-u55-256"])
    result = found.score(_point(1 << 20))
    assert result.sram_lower_bound_bytes == 16 * 16 * 16
    assert "smallest stripe needs 0 B, beside" in result.sram_lower_bound_derivation
    smallest = found.score(PointConfig(256, small_options("vela", False), 1 << 20))
    assert result.sram_lower_bound_bytes <= smallest.sram_used_bytes < 16 * 16 * 8 + 16 * 16 * 16


def test_an_op_reading_all_rows_holds_them_beside_its_output() -> None:
    """A global mean reads every row and column of a feature map the model never shows, one
    channel quantum (16) at a time: the bound is reached while it runs. (Rows wider than
    `row_sums.MAX_ROW_WIDTH`: a mean that sums rows first reads one row at a time.)"""
    b = ModelBuilder(0, name="pooled")
    x = b.conv2d(b.input((1, 8, 136, 4)), 32, kernel=1, activation="RELU")
    x = b.conv2d(x, 32, kernel=3, activation="RELU")
    b.output(b.mean(x, keep_dims=False))
    result = session(b.build(), *SHARED_SRAM["ethos-u55-256"]).score(_point(1 << 20))
    assert 8 * 136 * 16 < result.sram_lower_bound_bytes <= result.sram_used_bytes
    assert result.sram_lower_bound_derivation.startswith("while MEAN")


def test_nothing_bounds_sram_when_the_arena_is_in_dram() -> None:
    model = COMPOSITIONS["chain"]().build()
    result = session(model, "ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram").score(
        _point(1 << 20)
    )
    assert result.sram_lower_bound_bytes == 0
    assert "not in SRAM" in result.sram_lower_bound_derivation


def test_the_bound_is_stored_with_the_estimate() -> None:
    model = COMPOSITIONS["residual"]().build()
    result = session(model, *SHARED_SRAM["ethos-u55-256"]).score(_point(1 << 20))
    data = result.to_json()
    assert data["sram_lower_bound_bytes"] == result.sram_lower_bound_bytes
    assert Estimate.from_json(data) == result


def _point(sram: int) -> PointConfig:
    return PointConfig(sram, POINT_OPTIONS)
