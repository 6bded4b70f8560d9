"""StripeConfig: how a tensor is tiled into stripes, and how many stripes of each shape result."""

from __future__ import annotations

import itertools
import math

_INT_MIN = -(2**31)


class StripeConfig:
    """An n-dimensional tiling: stripe `shape`, the `extent` it covers, the `strides` between
    stripes, the loop `order` (1 = outermost; 0 = not looped), the number of `stripes` per axis
    and the `offset` of the first stripe. Immutable and hashable by value, so equal configs
    reached through different propagations meet in the same dictionaries."""

    __slots__ = ("_hash", "extent", "key", "offset", "order", "shape", "strides", "stripes")

    def __init__(
        self,
        shape: tuple[int, ...],
        extent: tuple[int, ...],
        strides: tuple[float, ...],
        order: tuple[int, ...],
        stripes: tuple[int, ...],
        offset: tuple[int, ...],
    ) -> None:
        self.shape = tuple(shape)
        self.extent = tuple(extent)
        self.strides = tuple(float(s) for s in strides)
        self.order = tuple(order)
        self.stripes = tuple(stripes)
        self.offset = tuple(offset)
        self.key = (self.shape, self.extent, self.strides, self.order, self.stripes, self.offset)
        self._hash = hash(self.key)

    @classmethod
    def from_fields(
        cls,
        shape: tuple[int, ...],
        extent: tuple[int, ...],
        strides: tuple[float, ...],
        order: tuple[int, ...],
        stripes: tuple[int, ...],
        offset: tuple[int, ...],
    ) -> StripeConfig:
        """A config from fields that are already tuples of the right types (float strides),
        as batched propagation makes them by the ten thousand: no conversions."""
        config = cls.__new__(cls)
        config.shape, config.extent, config.strides = shape, extent, strides
        config.order, config.stripes, config.offset = order, stripes, offset
        config.key = (shape, extent, strides, order, stripes, offset)
        config._hash = hash(config.key)
        return config

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StripeConfig) and self.key == other.key

    def __repr__(self) -> str:
        return (
            f"StripeConfig(shape={self.shape}, extent={self.extent}, strides={self.strides}, "
            f"order={self.order}, stripes={self.stripes}, offset={self.offset})"
        )

    @property
    def stripe_count(self) -> int:
        return math.prod(self.stripes)

    @property
    def non_overlapping(self) -> bool:
        """True when consecutive stripes tile without overlap (shape equals strides), the
        condition for the config to describe a plan's boundary output."""
        return all(s - t == 0 for s, t in zip(self.shape, self.strides, strict=True))


def axis_stripe_sizes(
    start: int, count: int, stride: int, shape: int, extent: int, sliding: bool
) -> dict[int, int]:
    """Size -> number of stripes along one axis. Stripes wholly inside the extent have the
    stripe shape; edge stripes are clipped. With `sliding`, each stripe only counts the part
    not already covered by its predecessor (the data a sliding window must newly fetch)."""
    sizes: dict[int, int] = {}
    if stride == 0:
        size = min(start + shape, extent) - max(start, 0)
        if size > 0:
            sizes[size] = 1 if sliding else count
        return sizes
    high = _INT_MIN
    i = 0
    while i < count:
        if (not sliding or i > 0) and start >= 0 and extent - shape - start >= 0 and stride > 0:
            whole = min(count - i, (extent - shape - start) // stride + 1)
            size = stride if sliding else shape
            sizes[size] = sizes.get(size, 0) + whole
            i += whole
            start += whole * stride
            high = min(start - stride + shape, extent)
            continue
        low = max(start, 0)
        if sliding:
            low = max(low, high)
        high = min(start + shape, extent)
        size = high - low
        if size > 0:
            sizes[size] = sizes.get(size, 0) + 1
        start += stride
        i += 1
    return sizes


def count_stripes(config: StripeConfig, sliding: bool = False) -> list[tuple[tuple[int, ...], int]]:
    """Every distinct stripe shape the config produces with its count, in lexicographic shape
    order (the order the original's copy-cycle estimate depends on for its first block)."""
    per_axis = [
        sorted(
            axis_stripe_sizes(
                config.offset[a],
                config.stripes[a],
                int(config.strides[a]),
                config.shape[a],
                config.extent[a],
                sliding,
            ).items()
        )
        for a in range(len(config.order))
    ]
    return [
        (tuple(size for size, _ in combo), math.prod(n for _, n in combo))
        for combo in itertools.product(*per_axis)
    ]
