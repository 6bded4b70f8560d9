"""NPU_OP_DMA_START: a byte copy between regions, or into SHRAM (the LUT) when the region
register's internal bit (bit 8) is set. Vela's streams use the 1-D mode: DMA0_LEN bytes
from DMA0_SRC to DMA0_DST. The copy moves the written mask with the bytes, so copying
uninitialised bytes (burst padding past a tensor's end) is not itself an error; using them
later is. The simulator runs the copy when it is started; `machine` checks that nothing
touches its bytes before the DMA_WAIT that completes it.
"""

from __future__ import annotations

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from cascader.simulator.context import Access, OpContext
from cascader.simulator.descriptors import Unsupported
from cascader.simulator.memory import SHRAM

_MODES = {0: "1D", 1: "2D", 2: "3D"}


def _region(param: int, what: str) -> int:
    if param & ~0x7FF:
        raise Unsupported(f"{what} bits {param & ~0x7FF:#x}")
    mode = (param >> 9) & 0x3
    if mode != 0:
        raise Unsupported(f"{what} stride mode {_MODES.get(mode, mode)}")
    return SHRAM if param & 0x100 else param & 0xFF


def run_dma(ctx: OpContext, channel_mode: int) -> tuple[Access, Access, int]:
    """Copy the bytes; returns the (read, write) accesses it made and how many of the bytes
    copied were unwritten at the source."""
    if channel_mode != 0:
        raise Unsupported(f"NPU_OP_DMA_START channel/mode {channel_mode:#x}")
    regs = ctx.regs
    src = _region(regs.param(cmd0.NPU_SET_DMA0_SRC_REGION), "NPU_SET_DMA0_SRC_REGION")
    dst = _region(regs.param(cmd0.NPU_SET_DMA0_DST_REGION), "NPU_SET_DMA0_DST_REGION")
    source = regs.address(cmd1.NPU_SET_DMA0_SRC)
    target = regs.address(cmd1.NPU_SET_DMA0_DST)
    length = regs.address(cmd1.NPU_SET_DMA0_LEN)
    if length < 0:
        raise Unsupported(f"NPU_SET_DMA0_LEN {length}")
    span = np.arange(length, dtype=np.int64)
    values, written = ctx.memory.gather(
        src, source + span, "DMA source", ctx.reporter, check_initialised=False
    )
    ctx.memory.scatter(dst, target + span, values, "DMA destination", ctx.reporter, written)
    return (
        Access(src, False, source, source + length, "DMA source"),
        Access(dst, True, target, target + length, "DMA destination"),
        int(length - np.count_nonzero(written)),
    )
