"""What every proof of a schedule asserts: the point's command streams, run on the simulator,
equal the integer reference over samples whose outputs vary (`telling`), the stripe schedule
does too, and the simulator found nothing wrong; and the options such proofs schedule with."""

from __future__ import annotations

import contextlib
import io

from cascader.artifact.run import firmware_runner
from cascader.core.options import CascaderOptions
from cascader.estimate import PointConfig
from cascader.pipeline import Session
from cascader.verify.point_check import Verification, verify_point


def proven(found: Session, config: PointConfig, samples: int) -> Verification:
    """`verify_point` of the compiled point over `samples`, asserted bit-exact and telling."""
    with contextlib.redirect_stdout(io.StringIO()):  # Vela's allocator warnings
        checked = verify_point(found, config, samples, compiled=firmware_runner(found, config))
    for out in checked.outputs:
        stream = out.command_stream_vs_reference
        assert stream is not None and stream.telling, stream
        assert stream.max_abs_diff == 0 and out.schedule_vs_reference.max_abs_diff == 0
    assert checked.findings == ()
    return checked


def small_options(cost_model: str, two_d: bool) -> CascaderOptions:
    """Options of small schedules, in row stripes or 2-D tiles, weights left in place: what a
    proof of a new kind of cascade schedules its network with, at a pool under them all."""
    return CascaderOptions(
        enable_striping=True,
        enable_multi_dimensional_striping=two_d,
        stripe_factors=2 if two_d else 5,
        cost_model=cost_model,
        always_copy_size=0,
    )
