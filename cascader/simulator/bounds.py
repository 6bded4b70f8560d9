"""Whether the operation the registers describe could stay inside the memory the driver set up.

The simulator sizes its arrays from register values. A damaged stream (a flipped byte in a
length, a width or a depth) can ask for billions of elements; a real NPU would read or write
far outside its regions there. So before an operation or DMA runs, every count taken from the
registers is bounded by the bytes all regions hold together (each element is at least a byte)
and an operation beyond that is reported as a finding and not executed."""

from __future__ import annotations

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from cascader.simulator.dma import transfer_bytes
from cascader.simulator.memory import Memory
from cascader.simulator.registers import RegisterFile

# Decoded weights an operation may have per byte of memory: far more than any real weight
# stream reaches, runs of zeros included.
_WEIGHTS_PER_BYTE = 64


def capacity(memory: Memory) -> int:
    """The bytes every region and SHRAM hold together."""
    return sum(image.size for image in memory.regions.values())


def dma_excess(regs: RegisterFile, memory: Memory) -> str | None:
    """Why the DMA the registers describe cannot stay inside memory, or None."""
    length, limit = transfer_bytes(regs), capacity(memory)
    if length > limit:
        return f"a DMA of {length} bytes, more than the {limit} bytes all regions hold"
    return None


def operation_excess(regs: RegisterFile, memory: Memory, elementwise: bool) -> str | None:
    """Why the block operation the registers describe cannot stay inside memory, or None."""
    limit = capacity(memory)

    def size(*registers: cmd0) -> int:
        count = 1
        for register in registers:
            count *= regs.param(register) + 1
        return count

    ofm = size(cmd0.NPU_SET_OFM_WIDTH_M1, cmd0.NPU_SET_OFM_HEIGHT_M1, cmd0.NPU_SET_OFM_DEPTH_M1)
    ifm = size(cmd0.NPU_SET_IFM_WIDTH0_M1, cmd0.NPU_SET_IFM_HEIGHT0_M1, cmd0.NPU_SET_IFM_DEPTH_M1)
    counts = {"output elements": (ofm, limit), "input elements": (ifm, limit)}
    if not elementwise:
        window = size(cmd0.NPU_SET_KERNEL_WIDTH_M1, cmd0.NPU_SET_KERNEL_HEIGHT_M1)
        window *= regs.param(cmd0.NPU_SET_IFM_DEPTH_M1) + 1
        weights = window * (regs.param(cmd0.NPU_SET_OFM_DEPTH_M1) + 1)
        counts["weights"] = (weights, limit * _WEIGHTS_PER_BYTE)
        for register in (cmd1.NPU_SET_WEIGHT_LENGTH, cmd1.NPU_SET_WEIGHT1_LENGTH,
                         cmd1.NPU_SET_SCALE_LENGTH):  # fmt: skip
            counts[f"{register.name} bytes"] = (regs.value(register), limit)
    for what, (count, bound) in counts.items():
        if count > bound:
            return f"{count} {what}, more than {bound} for the {limit} bytes all regions hold"
    return None
