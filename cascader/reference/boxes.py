"""Boxes of feature maps, and what a kernel op reads along one spatial axis for a box of its
output: the IFM rows (or columns) it needs, how the NPU's 2x upscaled read of them is cropped,
and the padding left at each end. A stripe at the edge of the OFM keeps the op's padding, an
interior stripe gets none, as Vela programs each stripe's NpuPadding."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AxisRead:
    """One spatial axis of a kernel op's read for an output range."""

    ifm_start: int  # IFM elements [ifm_start, ifm_end) before upscaling
    ifm_end: int
    crop: int  # upscaled elements dropped before the first one used
    length: int  # upscaled elements used
    pad_before: int
    pad_after: int


def axis_read(
    out_start: int,
    out_size: int,
    stride: int,
    extent: int,
    pad_before: int,
    in_size: int,
    factor: int,
    zeros: bool = False,
) -> AxisRead:
    """The read of outputs [out_start, out_start + out_size) of a kernel of dilated `extent`
    over an IFM of `in_size` elements read `factor` times upscaled. With `zeros` (zeros
    inserted after each element, a transposed convolution) a read starting on an inserted
    zero starts at the next element, the zero read as padding, as the NPU reads it."""
    start = out_start * stride - pad_before
    end = (out_start + out_size - 1) * stride - pad_before + extent
    first = min(max(start, 0), in_size * factor)
    last = max(min(end, in_size * factor), first)
    if zeros and first % factor and first < last:
        first += factor - first % factor
    ifm_start, ifm_end = first // factor, -(-last // factor)
    return AxisRead(
        ifm_start=ifm_start,
        ifm_end=ifm_end,
        crop=first - ifm_start * factor,
        length=last - first,
        pad_before=first - start,
        pad_after=end - last,
    )
