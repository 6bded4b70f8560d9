"""Propagation, stripe counting and output stripe generation, against hand-computed values."""

from cascader.core.propagator import Propagator
from cascader.core.stripe_config import StripeConfig, count_stripes
from cascader.core.stripe_generation import (
    axis_splits,
    cascadable_axes,
    generate_output_stripe_configs,
    stripe_orders,
)
from cascader.ethosu.synthetic import GraphBuilder

# NHWC 3x3 stride-2 convolution with 8 input channels and padding 1.
CONV_3X3_S2 = Propagator(
    [
        [1, 0, 0, 0, 0],
        [0, 2, 0, 0, 1],
        [0, 0, 2, 0, 1],
        [0, 0, 0, 0, 8],
        [0, 0, 0, 0, 1],
    ],
    [0, -1, -1, 0],
)
# Output stripes of 4 rows over an 8x8x16 output, rows looped outermost.
OUTPUT = StripeConfig(
    (1, 4, 8, 16), (1, 8, 8, 16), (1, 4, 8, 16), (4, 1, 2, 3), (1, 2, 1, 1), (0,) * 4
)


def test_propagating_a_3x3_stride_2_conv_stripe():
    needed = CONV_3X3_S2.propagate(OUTPUT)
    # 4 output rows at stride 2 with a 3-row kernel need 2*4+1 = 9 input rows.
    assert needed.shape == (1, 9, 17, 8)
    assert needed.extent == (1, 17, 17, 8)
    assert needed.strides == (1.0, 8.0, 16.0, 0.0)
    assert needed.order == (4, 1, 2, 0)
    assert needed.stripes == (1, 2, 1, 1)
    assert needed.offset == (0, -1, -1, 0)


def test_stripe_counts_clip_the_padded_edges():
    needed = CONV_3X3_S2.propagate(OUTPUT)
    # First stripe starts at row -1: only 8 of its 9 rows exist; the second is whole.
    assert count_stripes(needed) == [((1, 8, 16, 8), 1), ((1, 9, 16, 8), 1)]
    # A sliding window fetches 8 new rows per stripe.
    assert count_stripes(needed, sliding=True) == [((1, 8, 16, 8), 2)]


def test_stripe_counts_of_an_uneven_split():
    config = StripeConfig((1, 3), (1, 10), (1, 3), (0, 1), (1, 4), (0, 0))
    assert count_stripes(config) == [((1, 1), 1), ((1, 3), 3)]


def test_axis_splits_are_inverse_powers_of_two_aligned_plus_the_last_resort():
    assert axis_splits(12, 2, 5, True) == [2, 4, 6, 12]
    assert axis_splits(112, 8, 5, True) == [8, 16, 32, 56, 112]
    assert axis_splits(112, 8, 5, False) == [112]


def test_one_order_per_outermost_axis():
    assert stripe_orders(3) == [(1, 2, 3), (2, 3, 1), (3, 1, 2)]


def test_single_axis_stripe_configs_of_a_pointwise_conv():
    builder = GraphBuilder()
    out = builder.conv(builder.input(8, 8, 16), 16)
    part = builder.build([out]).graph.parts[0]
    # Batch is not projected onto any input axis; channels only reach the weights.
    assert cascadable_axes(part) == [True, True, True, True]
    configs = generate_output_stripe_configs(part, 3, True, False)
    shapes = {c.shape for c in configs}
    assert shapes == {
        (1, 2, 8, 16),
        (1, 4, 8, 16),
        (1, 8, 2, 16),
        (1, 8, 4, 16),
        (1, 8, 8, 8),
        (1, 8, 8, 16),
    }
    # Striped shapes get one config per order whose outermost axis is actually split.
    rows = [c for c in configs if c.shape == (1, 4, 8, 16)]
    assert [c.order for c in rows] == [(4, 1, 2, 3)]
    assert rows[0].stripes == (1, 2, 1, 1)
    full = [c for c in configs if c.shape == (1, 8, 8, 16)]
    assert len(full) == 1 and full[0].order == (1, 2, 3, 4)
    multi = generate_output_stripe_configs(part, 3, True, True)
    assert len({c.shape for c in multi}) == 1 * 3 * 3 * 2
    assert generate_output_stripe_configs(part, 3, False, False) == full
