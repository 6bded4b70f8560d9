"""Boxes of feature maps, and which boxes of its inputs an NPU op reads for a box of its
output. Boxes are NHWC (start, shape) over an op's 4-D feature maps; NHCWB16 tensors keep
NHWC boxes (their addresses follow the brick layout)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from cascader.ir.errors import ScheduleError
from cascader.ir.npu_ops import (
    BinaryElementwise,
    Concatenation,
    Conv2D,
    Identity,
    NpuOp,
    Pooling,
    dilated_kernel,
    resamples,
    stripes_rows,
)


@dataclass(frozen=True)
class Box:
    """An axis-aligned block of a tensor: start and shape per axis."""

    start: tuple[int, ...]
    shape: tuple[int, ...]

    @classmethod
    def whole(cls, shape: Sequence[int]) -> Box:
        return cls((0,) * len(shape), tuple(shape))

    @cached_property
    def end(self) -> tuple[int, ...]:
        """Kept once computed: the scheduler asks a box for its end again and again."""
        return tuple(s + n for s, n in zip(self.start, self.shape, strict=True))

    @property
    def empty(self) -> bool:
        return any(n <= 0 for n in self.shape)

    def slices(self) -> tuple[slice, ...]:
        return tuple(slice(s, s + n) for s, n in zip(self.start, self.shape, strict=True))

    def intersect(self, other: Box) -> Box:
        """The common part; zero-sized along an axis where they do not overlap."""
        start = tuple(max(a, b) for a, b in zip(self.start, other.start, strict=True))
        end = tuple(min(a, b) for a, b in zip(self.end, other.end, strict=True))
        return Box(start, tuple(max(e - s, 0) for s, e in zip(start, end, strict=True)))

    def union(self, other: Box | None) -> Box:
        """The smallest box holding both (`other` None: this box)."""
        if other is None:
            return self
        lo = tuple(min(x, y) for x, y in zip(self.start, other.start, strict=True))
        hi = tuple(max(x, y) for x, y in zip(self.end, other.end, strict=True))
        return Box(lo, tuple(h - low for low, h in zip(lo, hi, strict=True)))

    def contains(self, other: Box) -> bool:
        pairs = zip(self.start, self.end, other.start, other.end, strict=True)
        return all(a <= b and b_end <= a_end for a, a_end, b, b_end in pairs)

    def to_json(self) -> dict:
        return {"start": list(self.start), "shape": list(self.shape)}


def window_axis(start: int, size: int, stride: int, kernel: int, pad: int, extent: int):
    """Input rows [lo, hi) a sliding window reads for outputs [start, start + size), clipped to
    the input, and the padding before/after the clipped range."""
    lo = start * stride - pad
    hi = (start + size - 1) * stride + kernel - pad
    return max(lo, 0), min(hi, extent), max(-lo, 0), max(hi - extent, 0)


def zeros_upscaled_rows(
    start: int, size: int, kernel: int, pad: int, extent: int
) -> tuple[int, int, int, int]:
    """IFM rows [lo, hi) a stride-1 window of dilated height `kernel` reads for outputs
    [start, start + size) over an IFM of `extent` rows read upscaled with zeros inserted
    after each row, and the padding before/after them. A window starting on an inserted row
    starts at the next IFM row, the zero row counted as padding (which holds zeros too), as
    the NPU cannot start an upscaled read between two IFM rows."""
    first_wanted = start - pad
    end = start + size - 1 - pad + kernel
    first = min(max(first_wanted, 0), 2 * extent)
    last = max(min(end, 2 * extent), first)
    if first % 2 and first < last:
        first += 1
    return first // 2, -(-last // 2), first - first_wanted, end - last


def input_boxes(op: NpuOp, ofm: Box) -> tuple[tuple[Box, ...], tuple[int, int, int, int]]:
    """Per feature-map input the box `ofm` reads, and the stripe's padding."""
    n0, h0, w0, c0 = ofm.start
    n, h, w, c = ofm.shape
    if isinstance(op, Conv2D | Pooling):
        rows_only = h != op.ofm.shape[1] and stripes_rows(op)
        if resamples(op) and (w != op.ofm.shape[2] or (h != op.ofm.shape[1] and not rows_only)):
            raise ScheduleError(f"{op.name}: a resampling op cannot be striped spatially")
        region = op.ifm_region if isinstance(op, Conv2D) and op.ifm_region else op.ifm.shape
        offset = op.ifm_offset if isinstance(op, Conv2D) and op.ifm_offset else (0, 0, 0, 0)
        kh, kw = dilated_kernel(op)
        k, p = op.kernel, op.padding
        whole_depth = (isinstance(op, Conv2D) and op.kind != "depthwise_conv2d") or (
            isinstance(op, Pooling) and op.pool_type == "SUM"
        )
        d0, d = (0, region[3]) if whole_depth else (c0, c)
        if rows_only:  # the stripe's rows, every column
            y0, y1, top, bottom = zeros_upscaled_rows(h0, h, kh, p.top, region[1])
            ifm = Box((offset[0], offset[1] + y0, offset[2], d0 + offset[3]),
                      (region[0], y1 - y0, region[2], d))  # fmt: skip
            return (ifm,), (top, p.left, bottom, p.right)
        if op.upscale != "NONE":  # every row and column, the channels the output slice reads
            ifm = Box((*offset[:3], d0 + offset[3]), (*region[:3], d))
            return (ifm,), (p.top, p.left, p.bottom, p.right)
        y0, y1, top, bottom = window_axis(h0, h, k.stride_h, kh, p.top, region[1])
        x0, x1, left, right = window_axis(w0, w, k.stride_w, kw, p.left, region[2])
        box = Box(
            (n0 + offset[0], y0 + offset[1], x0 + offset[2], d0 + offset[3]),
            (n, y1 - y0, x1 - x0, d),
        )
        return (box,), (top, left, bottom, right)
    if isinstance(op, BinaryElementwise):
        boxes = []
        for tensor in (op.ifm, op.ifm2):
            start = tuple(
                0 if size == 1 else s for size, s in zip(tensor.shape, ofm.start, strict=True)
            )
            shape = tuple(
                1 if size == 1 else s for size, s in zip(tensor.shape, ofm.shape, strict=True)
            )
            boxes.append(Box(start, shape))
        return tuple(boxes), (0, 0, 0, 0)
    if isinstance(op, Identity) and op.ifm.shape != op.ofm.shape:
        return (_copied(op, ofm),), (0, 0, 0, 0)
    if isinstance(op, Concatenation):
        return tuple(_copied(copy, ofm) for copy in op.copies), (0, 0, 0, 0)
    return (ofm,), (0, 0, 0, 0)


def _copied(op: Identity, ofm: Box) -> Box:
    """The IFM box a block copy reads for `ofm` (empty when it writes none of it)."""
    inside = copy_box(op, ofm)
    return Box((0, 0, 0, 0), (0, 0, 0, 0)) if inside is None else inside[0]


def copy_box(op: Identity, ofm: Box) -> tuple[Box, Box] | None:
    """For a block copy: the IFM box read and the part of `ofm` written, or None when the
    stripe lies outside the copied region (a pad's border)."""
    region = op.region or op.ifm.shape
    out_offset = op.ofm_offset or (0,) * 4
    in_offset = op.ifm_offset or (0,) * 4
    steps = op.ifm_strides or (1,) * 4
    lo = [max(s, o) for s, o in zip(ofm.start, out_offset, strict=True)]
    hi = [min(e, o + r) for e, o, r in zip(ofm.end, out_offset, region, strict=True)]
    if any(b <= a for a, b in zip(lo, hi, strict=True)):
        return None
    written = Box(tuple(lo), tuple(b - a for a, b in zip(lo, hi, strict=True)))
    start = tuple(
        i + (a - o) * s for i, a, o, s in zip(in_offset, lo, out_offset, steps, strict=True)
    )
    shape = tuple((b - a - 1) * s + 1 for a, b, s in zip(lo, hi, steps, strict=True))
    return Box(start, shape), written
