"""NPU_OP_DMA_START: a byte copy between regions, or into SHRAM (the LUT) when the region
register's internal bit (bit 8) is set. Vela's streams use the 1-D mode: DMA0_LEN bytes
from DMA0_SRC to DMA0_DST. The Ethos-U65 also has 2-D and 3-D modes (bits 9-10 of a side's
region register): DMA0_LEN bytes per line, DMA0_SIZE0 lines per plane, DMA0_SIZE1 planes,
the strided side skipping DMA0_SKIP0 bytes after each line and DMA0_SKIP1 after each plane
(one skip pair for both sides, as Arm's Linux driver reads it for the Ethos-U65), and the
other side taking the bytes in order; the Ethos-U55 runs 1-D DMAs only. The copy moves the
written mask with the bytes, so copying uninitialised bytes (burst padding past a tensor's
end) is not itself an error; using them later is. The simulator runs the copy when it is
started; `machine` checks that nothing touches its bytes before the DMA_WAIT that completes
it.
"""

from __future__ import annotations

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from cascader.simulator.context import Access, OpContext
from cascader.simulator.descriptors import Unsupported
from cascader.simulator.memory import SHRAM
from cascader.simulator.registers import RegisterFile

_MODES = {0: "1D", 1: "2D", 2: "3D"}


def _side(param: int, what: str) -> tuple[int, int]:
    """(region, stride mode) of a DMA side's region register."""
    if param & ~0x7FF:
        raise Unsupported(f"{what} bits {param & ~0x7FF:#x}")
    mode = (param >> 9) & 0x3
    if mode not in _MODES:
        raise Unsupported(f"{what} stride mode {mode}")
    return (SHRAM if param & 0x100 else param & 0xFF), mode


def _modes(regs: RegisterFile) -> tuple[int, int]:
    return (
        (regs.param(cmd0.NPU_SET_DMA0_SRC_REGION) >> 9) & 0x3,
        (regs.param(cmd0.NPU_SET_DMA0_DST_REGION) >> 9) & 0x3,
    )


def transfer_bytes(regs: RegisterFile) -> int:
    """The bytes the DMA the registers set up moves: DMA0_LEN, times the lines and planes of
    a strided side's mode."""
    length = regs.address(cmd1.NPU_SET_DMA0_LEN)
    mode = max(_modes(regs))
    if mode >= 1:
        length *= regs.param(cmd0.NPU_SET_DMA0_SIZE0)
    if mode == 2:
        length *= regs.param(cmd0.NPU_SET_DMA0_SIZE1)
    return length


def _addresses(regs: RegisterFile, start: int, mode: int, total: int) -> np.ndarray:
    """The byte addresses one side of the DMA touches, in transfer order."""
    if mode == 0:
        return start + np.arange(total, dtype=np.int64)
    length = regs.address(cmd1.NPU_SET_DMA0_LEN)
    size0 = regs.param(cmd0.NPU_SET_DMA0_SIZE0)
    line = length + regs.address(cmd1.NPU_SET_DMA0_SKIP0)
    planes = regs.param(cmd0.NPU_SET_DMA0_SIZE1) if mode == 2 else 1
    plane = size0 * line + (regs.address(cmd1.NPU_SET_DMA0_SKIP1) if mode == 2 else 0)
    lines = (np.arange(planes, dtype=np.int64)[:, None] * plane
             + np.arange(size0, dtype=np.int64)[None, :] * line).ravel()  # fmt: skip
    return start + (lines[:, None] + np.arange(length, dtype=np.int64)[None, :]).ravel()


def run_dma(ctx: OpContext, channel_mode: int) -> tuple[Access, Access, int]:
    """Copy the bytes; returns the (read, write) accesses it made (each the span its side
    covers) and how many of the bytes copied were unwritten at the source."""
    if channel_mode != 0:
        raise Unsupported(f"NPU_OP_DMA_START channel/mode {channel_mode:#x}")
    regs = ctx.regs
    src, src_mode = _side(regs.param(cmd0.NPU_SET_DMA0_SRC_REGION), "NPU_SET_DMA0_SRC_REGION")
    dst, dst_mode = _side(regs.param(cmd0.NPU_SET_DMA0_DST_REGION), "NPU_SET_DMA0_DST_REGION")
    if (src_mode or dst_mode) and not ctx.config.is_u65:
        raise Unsupported(f"a {_MODES[max(src_mode, dst_mode)]} DMA on {ctx.config.name}")
    if src_mode and dst_mode and src_mode != dst_mode:
        raise Unsupported(f"a {_MODES[src_mode]} source and a {_MODES[dst_mode]} destination")
    source = regs.address(cmd1.NPU_SET_DMA0_SRC)
    target = regs.address(cmd1.NPU_SET_DMA0_DST)
    length = transfer_bytes(regs)
    if regs.address(cmd1.NPU_SET_DMA0_LEN) < 0 or length < 0:
        raise Unsupported(f"NPU_SET_DMA0_LEN {regs.address(cmd1.NPU_SET_DMA0_LEN)}")
    reads = _addresses(regs, source, src_mode, length)
    writes = _addresses(regs, target, dst_mode, length)
    values, written = ctx.memory.gather(
        src, reads, "DMA source", ctx.reporter, check_initialised=False
    )
    ctx.memory.scatter(dst, writes, values, "DMA destination", ctx.reporter, written)

    def span(region: int, start: int, addresses: np.ndarray, write: bool, what: str) -> Access:
        if not len(addresses):
            return Access(region, write, start, start, what)
        return Access(region, write, int(addresses.min()), int(addresses.max()) + 1, what)

    return (
        span(src, source, reads, False, "DMA source"),
        span(dst, target, writes, True, "DMA destination"),
        int(length - np.count_nonzero(written)),
    )
