"""What the simulator reports when a command stream does something the hardware would not do
as the compiler meant: findings (one line each, execution goes on) and the typed error raised
when the caller asks for strict execution or the stream cannot be read at all."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class FindingKind(str, Enum):
    """The classes of problem the simulator detects."""

    UNSUPPORTED = "unsupported"  # an opcode or register value the simulator cannot execute
    UNINITIALISED_READ = "uninitialised-read"  # bytes read that no command nor the image wrote
    OUT_OF_REGION = "out-of-region"  # an access outside a region's declared size
    UNKNOWN_REGION = "unknown-region"  # an access to a region the driver did not set up
    MALFORMED_STREAM = "malformed-stream"  # truncated stream, bad header, missing STOP
    BAD_WEIGHTS = "bad-weights"  # a weight or scale stream that does not decode as programmed
    HAZARD = "hazard"  # an access racing an outstanding DMA or kernel (a missing wait)
    DRIVER_REFUSAL = "driver-refusal"  # a file Arm's driver or TFLM's kernel would not run


@dataclass(frozen=True)
class Finding:
    """One problem, tied to the command (byte offset in the register stream) that caused it."""

    kind: FindingKind
    offset: int  # byte offset of the command in the register command stream, -1 if none
    command: str  # the command's name, e.g. NPU_OP_CONV
    message: str

    def __str__(self) -> str:
        where = f"@{self.offset:#06x} {self.command}" if self.offset >= 0 else self.command
        return f"{self.kind.value}: {where}: {self.message}"


class SimulationError(Exception):
    """Raised for a stream that cannot be simulated, or for the first finding when strict."""

    def __init__(self, message: str, finding: Finding | None = None) -> None:
        super().__init__(message)
        self.finding = finding
