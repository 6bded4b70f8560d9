"""A PAD (the zero-point border TFLite puts before a stride-2 convolution or pooling) reads
only the input rows under each of its stripes, so cascades run through it: ResNet-50's stem
and its stride-2 blocks are no longer cut at every PAD. Proven on the simulator: command
streams equal the reference over samples whose outputs vary, with stripes that lie wholly in
a pad's border (they read nothing and only fill)."""

from __future__ import annotations

import contextlib
import io

import pytest
from proofs import proven
from sessions import session

from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.ethosu.propagation import op_propagation
from cascader.ir.npu_ops import Identity
from cascader.testing import architectures as arch
from cascader.verify.cut import cut_where_varying

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
SAMPLES = 8


def _pads(found) -> set[int]:
    ops = found.prepared.network.ops
    return {i for i, op in enumerate(ops) if isinstance(op, Identity) and op.ofm_fill is not None}


def test_a_pad_stripe_reads_the_rows_under_it() -> None:
    found = session(arch.resnet50_like(size=32, classes=10).build(), *U55)
    net = found.prepared.network
    pad = next(net.ops[i] for i in sorted(_pads(found)))
    propagator = op_propagation(pad, (1, 1, 1, 16)).propagators[0]
    top, left = pad.ofm_offset[1], pad.ofm_offset[2]
    assert top > 0 and left > 0
    # output row r reads input row r - top: a linear map, not the whole input
    assert not (propagator.transform[:, :-1] == 0).all()
    assert propagator.offset[1] == -top


@pytest.mark.slow
@pytest.mark.parametrize(
    ("system", "cost_model"), [(U55, "tvm"), (U65, "vela")], ids=["u55-tvm", "u65-vela"]
)
def test_pads_inside_cascades_are_bit_exact(system: tuple, cost_model: str) -> None:
    model, _ = cut_where_varying(arch.resnet50_like(size=32, classes=10).build(), SAMPLES)
    found = session(model, *system)
    options = CascaderOptions(
        enable_striping=True,
        enable_multi_dimensional_striping=cost_model == "vela",
        stripe_factors=2 if cost_model == "vela" else 5,
        cost_model=cost_model,
        always_copy_size=0,
        max_plan_size=14,
    )
    config = PointConfig(32768, options, proposal_region_bytes=1 << 22)
    with contextlib.redirect_stdout(io.StringIO()):
        point = found.schedule(config)
    graph, pads = found.prepared.network.graph, _pads(found)
    cascaded = {
        part.id
        for plan in point.cascade.chosen.plans
        if plan.part_group.bit_count() > 1
        for part in graph.parts
        if plan.part_group >> part.id & 1
    }
    assert cascaded & pads
    proven(found, config, SAMPLES)
