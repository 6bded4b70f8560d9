"""Narrow feature maps stored NHWC (`PointConfig.narrow_nhwc`): a feature map whose channel
count is not a multiple of 16 takes its own bytes, not those of whole 16-channel bricks, so
the smallest schedules shrink. The schedules are proven on the simulator: command streams
equal the reference, over samples whose outputs vary."""

from __future__ import annotations

import contextlib
import io
import pickle
from dataclasses import replace

import pytest
from proofs import proven
from sessions import session

from cascader.core.options import CascaderOptions
from cascader.estimate import Estimate, PointConfig
from cascader.ir.layout import BRICK
from cascader.ir.npu_ops import Layout, feature_maps
from cascader.schedule.network import Network
from cascader.testing.architectures import mobilenet_v2, person_detection
from cascader.verify.cut import cut_where_varying

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
SAMPLES = 8
POOL = 256  # below every schedule: each point runs its options' smallest
# The smallest schedules' options (dse.space.SMALLEST) under the "vela" cost model.
SMALLEST = CascaderOptions(enable_multi_dimensional_striping=True, stripe_factors=2,
                           always_copy_size=0, cost_model="vela")  # fmt: skip
MODELS = {
    "mobilenet_v2": lambda: mobilenet_v2(size=32, classes=10).build(),
    "person_detection": lambda: person_detection(size=48).build(),
}


def _narrow_nhwc(net: Network) -> set[str]:
    """The interior int8 feature maps (neither a function's input nor its output) whose
    channel count is not a multiple of 16, stored NHWC."""
    ends = {name for f in net.functions for name in (*f.inputs, *f.outputs)}
    return {
        t.name
        for op in net.ops
        for t in feature_maps(op)
        if t.shape[-1] % BRICK and t.dtype == "int8" and t.layout == Layout.NHWC
        and t.name not in ends
    }  # fmt: skip


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("model", list(MODELS))
def test_narrow_feature_maps_nhwc_are_smaller_and_bit_exact(system: tuple, model: str) -> None:
    telling, _ = cut_where_varying(MODELS[model](), SAMPLES)  # a 2-class softmax does not vary
    found = session(telling, *system)
    bricks = PointConfig(POOL, SMALLEST, proposal_region_bytes=1 << 20)
    narrow = replace(bricks, narrow_nhwc=True)
    # In bricks only where the front half or Vela's checks demand NHWC (softmax's input).
    assert _narrow_nhwc(found.prepared_for(bricks).network) < _narrow_nhwc(
        found.prepared_for(narrow).network
    )
    with contextlib.redirect_stdout(io.StringIO()):
        smallest = found.score(bricks)  # first: the scores of the two layouts are apart
        estimate = found.score(narrow)
    assert estimate.sram_used_bytes < smallest.sram_used_bytes
    assert estimate.narrow_nhwc and not smallest.narrow_nhwc
    # The bound holds for either layout's schedules.
    assert estimate.sram_lower_bound_bytes == smallest.sram_lower_bound_bytes
    assert estimate.sram_lower_bound_bytes <= estimate.sram_used_bytes
    proven(found, narrow, SAMPLES)


def test_the_cascader_off_takes_the_layout_too() -> None:
    found = session(MODELS["person_detection"](), *U55)
    bricks = PointConfig(POOL, None, buffer_weights=False)
    with contextlib.redirect_stdout(io.StringIO()):
        smallest = found.score(bricks)
        narrow = found.score(replace(bricks, narrow_nhwc=True))
    assert narrow.sram_used_bytes < smallest.sram_used_bytes


def test_the_prepared_model_builds_the_narrow_network_once_and_travels_without_it() -> None:
    found = session(MODELS["mobilenet_v2"](), *U55)
    prepared = found.prepared
    narrow = prepared.variant(True)
    assert narrow.narrow_nhwc and prepared.variant(True) is narrow
    assert prepared.variant(False) is prepared and narrow.variant(True) is narrow
    # What a scoring worker is handed (dse.evaluators.handover): the other layout is built
    # there again, from the front half's functions it carries.
    handed = pickle.loads(pickle.dumps(replace(prepared)))
    rebuilt = handed.variant(True).network
    assert _narrow_nhwc(rebuilt) == _narrow_nhwc(narrow.network)
    assert len(rebuilt.graph.parts) == len(prepared.network.graph.parts)


def test_the_estimate_says_so_only_when_narrow() -> None:
    bricks = Estimate(1024, None, True, 512, 1000.0)
    assert "narrow_nhwc" not in bricks.to_json()["cascader"]
    assert not Estimate.from_json(bricks.to_json()).narrow_nhwc
    narrow = replace(bricks, narrow_nhwc=True)
    assert narrow.to_json()["cascader"]["narrow_nhwc"] is True
    assert Estimate.from_json(narrow.to_json()) == narrow
