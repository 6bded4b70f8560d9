"""A plan's whole output laid over the whole input it consumes in row order (`core.overlay`,
`schedule.allocation.overlays`): each stripe's output rows land on input rows no later
stripe reads, so the two share bytes. The cascader counts the saving from the stripe
configs, the allocation lays chains of such pairs, and the schedules are proven on the
simulator, bit-exact against the reference and within 1 LSB of LiteRT."""

from __future__ import annotations

import contextlib
import io

import pytest
from proofs import proven, small_options
from sessions import session
from test_schedule import check_allocation, check_schedule

from cascader.core.overlay import overlay_offset, overlay_saving
from cascader.core.stripe_config import StripeConfig
from cascader.estimate import PointConfig
from cascader.ir.schedule import Schedule
from cascader.testing.architectures import mobilenet_v1

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram")
SAMPLES = 4


def _rows(height: int, stripes: int, halo: int, order: int = 1) -> StripeConfig:
    """A 16 x 16 x 16 map in `stripes` row stripes, each reading `halo` rows either side."""
    step = height // stripes
    return StripeConfig(
        (1, step + 2 * halo, 16, 16),
        (1, height, 16, 16),
        (1, step, 16, 16),
        (0, order, 0, 0),
        (1, stripes, 1, 1),
        (0, -halo, 0, 0),
    )


def test_a_3x3_convolution_in_row_stripes_lays_its_output_a_stripe_and_a_row_below() -> None:
    # Four stripes of four rows: stripe k writes rows up to 4k + 4 and reads from 4k - 1 on.
    output, input = _rows(16, 4, 0), _rows(16, 4, 1)
    offset = overlay_offset(output, input, 4096, 4096)
    assert offset == 5 * 256
    assert overlay_saving(offset, 4096, 4096) == 4096 - 5 * 256
    # A 1x1 convolution doubling the channels: its rows outrun the rows it consumes.
    assert overlay_offset(output, output, 8192, 4096) == 8192 - 3 * 1024
    assert overlay_saving(-1, 4096, 4096) == 0 and overlay_saving(0, 4096, 0) == 0


def test_rows_run_upward_lay_the_output_a_stripe_and_a_row_above() -> None:
    # Last stripe first: stripe k writes rows from 4k on and, with every stripe after it in
    # the run, reads rows up to 4k + 5.
    output, input = _rows(16, 4, 0), _rows(16, 4, 1)
    offset = overlay_offset(output, input, 4096, 4096, upward=True)
    assert offset == 5 * 256
    assert overlay_saving(offset, 4096, 4096, upward=True) == 4096 - 5 * 256
    # Halving the channels upward: the output's rows start below the rows still read.
    assert overlay_offset(output, output, 2048, 4096, upward=True) == 4096 - 3 * 512
    assert overlay_saving(4096 - 3 * 512, 2048, 4096, upward=True) == 3 * 512


def test_no_overlay_without_row_order() -> None:
    whole = _rows(16, 1, 0)
    assert overlay_offset(whole, whole, 4096, 4096) == -1
    # Columns looped outside the rows: every row is written before the last rows are read.
    columns_first = StripeConfig(
        (1, 4, 8, 16), (1, 16, 16, 16), (1, 4, 8, 16), (0, 2, 1, 0), (1, 4, 2, 1), (0, 0, 0, 0)
    )
    assert overlay_offset(columns_first, columns_first, 4096, 4096) == -1


def _laid(schedule: Schedule) -> list[tuple[int, int]]:
    """Pairs of whole tensors live at once whose bytes overlap (check_allocation proves each
    an output laid over the input it consumes, or an elementwise output written over its
    input)."""
    tensors = [b for b in schedule.buffers if b.kind == "tensor"]
    return [
        (a.index, b.index)
        for i, a in enumerate(tensors)
        for b in tensors[i + 1 :]
        if a.first <= b.last
        and b.first <= a.last
        and a.address < b.address + b.size
        and b.address < a.address + a.size
        and (a.address, a.size) != (b.address, b.size)
    ]


def _live_peak(schedule: Schedule) -> int:
    """The most bytes live at once, a buffer written exactly over another counted once: what
    any allocation keeping laid buffers apart needs at least."""
    peak = 0
    for step in range(len(schedule.steps)):
        live = {
            (b.address, b.size)
            for b in schedule.buffers
            if b.first <= step <= b.last and b.area == "sram"
        }
        peak = max(peak, sum(size for _, size in live))
    return peak


@pytest.mark.parametrize("two_d", [False, True], ids=["rows", "tiles"])
@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
def test_laid_outputs_are_bit_exact(system: tuple, two_d: bool) -> None:
    """MobileNetV1 0.25 at 96 x 96 (16 classes, so its outputs tell) at its smallest
    schedule: outputs laid over the inputs they consume, in less SRAM than the same buffers
    kept apart."""
    found = session(mobilenet_v1(size=96, alpha=0.25, classes=16, channels=1).build(), *system)
    config = PointConfig(4096, small_options("vela", two_d), 1 << 20)
    with contextlib.redirect_stdout(io.StringIO()):
        schedule = found.schedule(config).schedule
    check_schedule(schedule)
    check_allocation(schedule)
    assert _laid(schedule)
    assert schedule.sram_bytes < _live_peak(schedule)
    checked = proven(found, config, SAMPLES)
    for out in checked.outputs:
        assert out.reference_vs_litert.max_abs_diff <= checked.litert_tolerance <= 1
