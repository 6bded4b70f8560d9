"""One strided DMA for a feature-map window where the accelerator has them.

A window of a feature map (some rows, columns or channels of it) is many short lines apart in
one of the two buffers a copy moves it between. Copied as one 1-D DMA per line, each pays the
source's latency (on Ethos-U65 the DRAM's), where the estimate charges the copy once. The
Ethos-U65's DMA has 2-D and 3-D modes (bits 9-10 of NPU_SET_DMA0_SRC_REGION /
NPU_SET_DMA0_DST_REGION: 0 1-D, 1 2-D, 2 3-D): DMA0_LEN bytes per line, DMA0_SIZE0 lines per
plane, DMA0_SIZE1 planes, and after each line DMA0_SKIP0 bytes and after each plane DMA0_SKIP1
bytes skipped on the strided side; one skip pair serves both sides (Arm's Linux driver reads
both sides' strides from it on the Ethos-U65), so one side is strided and the other
contiguous. Vela's register file has the fields but its generator emits 1-D
DMAs only, so the commands are added to the stream it makes (`with_strided_dmas`). The
Ethos-U55 keeps one DMA per line."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ethosu.vela.api import NpuAddressRange, NpuDmaOperation, NpuOperation
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1
from ethosu.vela.register_command_stream_generator import CmdMode, CommandStreamEmitter

__all__ = ["DmaShape", "StridedDma", "strided_dma", "supports_strided_dma", "with_strided_dmas"]

_FAMILIES = ("ethos-u65",)
_SIZE_LIMIT = 0xFFFF  # DMA0_SIZE0 / DMA0_SIZE1 are 16-bit parameters
_MODE_SHIFT = 9


def supports_strided_dma(accelerator: str) -> bool:
    """Whether the accelerator's DMA has the 2-D and 3-D modes."""
    return accelerator.startswith(_FAMILIES)


@dataclass(frozen=True)
class DmaShape:
    """The lines a strided DMA moves: `size1` planes of `size0` lines of `length` bytes, the
    strided side skipping `skip0` bytes after each line and `skip1` after each plane."""

    length: int
    size0: int
    skip0: int
    size1: int = 1
    skip1: int = 0
    source_strided: bool = True

    @property
    def mode(self) -> int:
        """The stride mode of the strided side: 1 (2-D) or 2 (3-D)."""
        return 2 if self.size1 > 1 else 1

    @property
    def nbytes(self) -> int:
        return self.length * self.size0 * self.size1


class StridedDma(NpuDmaOperation):
    """A DMA Vela's generator takes as the 1-D copy of the spans its two sides cover (so its
    waits see every byte the DMA touches) and `with_strided_dmas` makes strided."""

    def __init__(self, src: NpuAddressRange, dest: NpuAddressRange, shape: DmaShape) -> None:
        super().__init__(src, dest)
        self.shape = shape


def _planes(starts: list[int], length: int) -> tuple[int, int, int, int] | None:
    """(size0, skip0, size1, skip1) when the line starts are planes of evenly spaced lines
    that do not overlap, else None."""
    count = len(starts)
    pitch = starts[1] - starts[0]
    if pitch < length:
        return None
    size0 = 1
    while size0 < count and starts[size0] - starts[size0 - 1] == pitch:
        size0 += 1
    if size0 == count:
        return count, pitch - length, 1, 0
    if count % size0:
        return None
    plane = starts[size0] - starts[0]
    skip1 = plane - size0 * pitch
    expected = [starts[0] + k * plane + j * pitch for k in range(count // size0)
                for j in range(size0)]  # fmt: skip
    if skip1 < 0 or expected != starts:
        return None
    return size0, pitch - length, count // size0, skip1


def strided_dma(
    runs: list[tuple[int, int, int]], src_region: int, dst_region: int
) -> StridedDma | None:
    """The one strided DMA doing the (source, destination, bytes) line copies `runs`, or None
    when they are not equal lines contiguous on one side and planes of evenly spaced lines on
    the other (within the size registers' range)."""
    if len(runs) < 2 or len({n for _, _, n in runs}) != 1:
        return None
    length = runs[0][2]
    sources, dests = [s for s, _, _ in runs], [d for _, d, _ in runs]
    for strided, contiguous, source_strided in ((sources, dests, True), (dests, sources, False)):
        if any(b - a != length for a, b in itertools.pairwise(contiguous)):
            continue
        found = _planes(strided, length)
        if found is None or max(found[0], found[2]) > _SIZE_LIMIT:
            continue
        size0, skip0, size1, skip1 = found
        shape = DmaShape(length, size0, skip0, size1, skip1, source_strided)
        span = strided[-1] + length - strided[0]
        whole = shape.nbytes
        src = NpuAddressRange(src_region, sources[0], span if source_strided else whole)
        dest = NpuAddressRange(dst_region, dests[0], whole if source_strided else span)
        return StridedDma(src, dest, shape)
    return None


def _region_param(region: int, mode: int) -> int:
    return region | mode << _MODE_SHIFT


def _commands(dma: StridedDma) -> tuple[list[int], list[int]]:
    """The commands making the DMA strided, set before its NPU_OP_DMA_START, and the ones set
    after it putting back the registers as Vela's generator left them (it leaves out a write
    of a value it believes a register holds)."""
    shape = dma.shape
    src_mode = shape.mode if shape.source_strided else 0
    dst_mode = 0 if shape.source_strided else shape.mode
    before = CommandStreamEmitter()
    before.cmd0_with_param(cmd0.NPU_SET_DMA0_SRC_REGION, _region_param(dma.src.region, src_mode))
    before.cmd0_with_param(cmd0.NPU_SET_DMA0_DST_REGION, _region_param(dma.dest.region, dst_mode))
    before.cmd1_with_address(cmd1.NPU_SET_DMA0_LEN, shape.length)
    before.cmd0_with_param(cmd0.NPU_SET_DMA0_SIZE0, shape.size0)
    before.cmd1_with_address(cmd1.NPU_SET_DMA0_SKIP0, shape.skip0)
    if shape.mode == 2:
        before.cmd0_with_param(cmd0.NPU_SET_DMA0_SIZE1, shape.size1)
        before.cmd1_with_address(cmd1.NPU_SET_DMA0_SKIP1, shape.skip1)
    after = CommandStreamEmitter()
    after.cmd0_with_param(cmd0.NPU_SET_DMA0_SRC_REGION, dma.src.region)
    after.cmd0_with_param(cmd0.NPU_SET_DMA0_DST_REGION, dma.dest.region)
    after.cmd1_with_address(cmd1.NPU_SET_DMA0_LEN, dma.src.length)
    return before.to_list(), after.to_list()


def with_strided_dmas(words: list[int], operations: list[NpuOperation]) -> list[int]:
    """Vela's register command stream of `operations` with each `StridedDma` made strided:
    its commands around the NPU_OP_DMA_START Vela emitted for it (one per DMA, in order)."""
    dmas = [op for op in operations if isinstance(op, NpuDmaOperation)]
    if not any(isinstance(op, StridedDma) for op in dmas):
        return words
    out: list[int] = []
    index = count = 0
    while index < len(words):
        word = words[index]
        size = 2 if word & CmdMode.Payload32 else 1
        command = words[index : index + size]
        if size == 1 and word & 0xFFFF == cmd0.NPU_OP_DMA_START.value:
            dma = dmas[count]
            count += 1
            if isinstance(dma, StridedDma):
                before, after = _commands(dma)
                out += [*before, *command, *after]
                index += size
                continue
        out += command
        index += size
    if count != len(dmas):
        raise ValueError(f"{len(dmas)} DMA operations but {count} NPU_OP_DMA_START commands")
    return out
