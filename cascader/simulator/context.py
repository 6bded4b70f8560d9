"""What an operation's implementation needs: the registers, memory, the accelerator, where
to report, and the record of the bytes it touched (for hazard checks against DMAs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cascader.simulator.accelerator import AcceleratorConfig
from cascader.simulator.memory import Memory, Reporter
from cascader.simulator.registers import RegisterFile


@dataclass(frozen=True)
class Access:
    """Bytes of one region an operation reads or writes: an interval [low, high), refined by
    the element addresses (first bytes of `element_bytes`-byte elements) when given."""

    region: int
    write: bool
    low: int
    high: int
    what: str
    addresses: np.ndarray | None = None
    element_bytes: int = 1

    @classmethod
    def of_elements(
        cls, region: int, write: bool, addresses: np.ndarray, size: int, what: str
    ) -> Access:
        flat = addresses.reshape(-1)
        if flat.size == 0:
            return cls(region, write, 0, 0, what)
        return cls(region, write, int(flat.min()), int(flat.max()) + size, what, flat, size)

    def overlaps(self, other: Access) -> bool:
        """Whether the two touch a common byte (at least one of them as an interval)."""
        if self.region != other.region or self.high <= other.low or other.high <= self.low:
            return False
        for dense, interval in ((self, other), (other, self)):
            if dense.addresses is not None and interval.addresses is None:
                first = dense.addresses
                last = first + dense.element_bytes
                return bool(np.any((first < interval.high) & (last > interval.low)))
        return True


@dataclass
class OpContext:
    regs: RegisterFile
    memory: Memory
    config: AcceleratorConfig
    reporter: Reporter
    accesses: list[Access] = field(default_factory=list)
