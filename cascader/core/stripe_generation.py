"""Candidate output stripe configs for a part: the search space of one part's striping."""

from __future__ import annotations

import itertools
import math

from cascader.core.part import Part
from cascader.core.stripe_config import StripeConfig


def cascadable_axes(part: Part) -> list[bool]:
    """Output axes that some propagator projects onto an input axis; only those can be striped
    usefully, since striping any other axis would not shrink what the part reads."""
    dims = len(part.output.shape)
    axes = [False] * dims
    for propagator in part.propagators:
        columns = propagator.transform[:, :-1] != 0
        for axis in range(min(dims, columns.shape[1])):
            if columns[:, axis].any():
                axes[axis] = True
    return axes


def axis_splits(extent: int, align: int, stripe_factors: int, striped: bool) -> list[int]:
    """Stripe sizes for one axis: the extent times 1, 1/2, 1/4, ... (stripe_factors - 1
    factors), rounded up to the alignment hint, plus the size-1-block last resort."""
    if not striped:
        return [extent]
    factors = [2.0**-i for i in range(stripe_factors - 1)] + [0.0]
    splits = {min(extent, max(math.ceil(extent * f / align), 1) * align) for f in factors}
    return sorted(splits)


def stripe_orders(dims: int) -> list[tuple[int, ...]]:
    """One loop order per axis, each making a different axis the outermost (order 1), which is
    the axis a rolling buffer rolls over."""
    return [tuple(1 + (j + i) % dims for j in range(dims)) for i in range(dims)]


def generate_output_stripe_configs(
    part: Part, stripe_factors: int, enable_striping: bool, multi_dimensional: bool
) -> list[StripeConfig]:
    """All output stripe configs to try for `part`, in the original's enumeration order."""
    if stripe_factors <= 0:
        return []
    output_shape = part.output.shape
    dims = len(output_shape)
    cascadable = cascadable_axes(part)
    splits = [
        axis_splits(
            output_shape[i],
            part.stripe_align_hint[i],
            stripe_factors,
            cascadable[i] and enable_striping,
        )
        for i in range(dims)
    ]
    shapes: list[tuple[int, ...]]
    if multi_dimensional:
        # The first axis varies fastest, matching the original's combination order.
        shapes = [tuple(reversed(c)) for c in itertools.product(*reversed(splits))]
    else:
        shapes = []
        for axis, options in enumerate(splits):
            for size in options:
                if output_shape[axis] != size:
                    shapes.append((*output_shape[:axis], size, *output_shape[axis + 1 :]))
        shapes.append(output_shape)
    orders = stripe_orders(dims)
    offset = (0,) * dims
    configs = []
    for shape in shapes:
        stripes = tuple(math.ceil(o / s) for o, s in zip(output_shape, shape, strict=True))
        strides = tuple(float(s) for s in shape)
        if shape == output_shape:
            configs.append(StripeConfig(shape, output_shape, strides, orders[0], stripes, offset))
            continue
        for order in orders:
            outer = order.index(1)
            if shape[outer] == output_shape[outer]:
                continue
            configs.append(StripeConfig(shape, output_shape, strides, order, stripes, offset))
    return configs
