"""The DMA runs of a feature-map copy, worked out for all lines at once, are the runs of the
line-by-line walk: every line of the box in each buffer (a run of channels in NHWC, a brick row
in NHCWB16), merged while source and destination both stay contiguous."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cascader.ethosu.codegen import _copy_runs
from cascader.ir.boxes import Box
from cascader.ir.npu_ops import Layout
from cascader.ir.schedule import Buffer


def _walk(box: Box, buf: Buffer, origin: tuple[int, ...]) -> list[tuple[int, int]]:
    """(address, bytes) of each line, one at a time."""
    e = buf.dtype_bytes
    _, _, fw, fc = buf.frame
    _, y0, x0, c0 = (b - o for b, o in zip(box.start, origin, strict=True))
    _, h, w, c = box.shape
    lines = []
    for y in range(y0, y0 + h):
        if buf.layout == Layout.NHCWB16:
            row = fw * math.ceil(fc / 16) * 16 * e
            for brick in range(c0 // 16, math.ceil((c0 + c) / 16)):
                lines.append(
                    (buf.address + y * row + x0 * 16 * e + brick * 16 * e * fw, w * 16 * e)
                )
        else:
            for x in range(x0, x0 + w):
                lines.append((buf.address + (y * fw * fc + x * fc + c0) * e, c * e))
    return lines


def _expected(box, src, src_origin, dst, dst_origin) -> list[tuple[int, int, int]]:
    runs: list[tuple[int, int, int]] = []
    pairs = zip(_walk(box, src, src_origin), _walk(box, dst, dst_origin), strict=True)
    for (s, n), (d, _) in pairs:
        if runs and runs[-1][0] + runs[-1][2] == s and runs[-1][1] + runs[-1][2] == d:
            runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + n)
        else:
            runs.append((s, d, n))
    return runs


@st.composite
def _copies(draw):
    layout = draw(st.sampled_from([Layout.NHWC, Layout.NHCWB16]))
    frame = (1, draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 40)))
    h, w = draw(st.integers(1, frame[1])), draw(st.integers(1, frame[2]))
    c = draw(st.integers(1, frame[3]))
    y, x = draw(st.integers(0, frame[1] - h)), draw(st.integers(0, frame[2] - w))
    channel = draw(st.integers(0, frame[3] - c))
    if layout == Layout.NHCWB16:  # brick copies start on a brick
        channel -= channel % 16
    box = Box((0, y, x, channel), (1, h, w, c))
    elem = draw(st.sampled_from([1, 2, 4]))

    def buffer(index: int) -> tuple[Buffer, tuple[int, ...]]:
        """A buffer holding the whole frame, or a window holding just the box."""
        wide = draw(st.booleans())
        address = 16 * draw(st.integers(0, 64))
        held = frame if wide else box.shape
        buf = Buffer(index, 0, "window", "sram", 2, held, layout, elem, 0, 0, 0, address)
        return buf, (0, 0, 0, 0) if wide else box.start

    return box, *buffer(0), *buffer(1)


@settings(max_examples=300, deadline=None)
@given(_copies())
def test_copy_runs_are_the_line_by_line_runs(copy) -> None:
    box, src, src_origin, dst, dst_origin = copy
    runs = _copy_runs(box, src, src_origin, dst, dst_origin)
    assert runs == _expected(box, src, src_origin, dst, dst_origin)
    assert all(type(v) is int for run in runs for v in run)
