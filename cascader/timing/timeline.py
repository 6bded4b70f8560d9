"""The cycles of a register command stream as its own waits let it run.

The command processor reads commands in order and costs nothing itself. Kernel operations
run one after another on the kernel engine, DMAs one after another on the DMA engine, and
the two engines overlap unless the stream says otherwise: NPU_OP_KERNEL_WAIT n holds the
command processor until at most n kernel operations are outstanding, NPU_OP_DMA_WAIT n until
at most n DMAs are, and issuing a job to a full queue (the accelerator's queue depths, as the
simulator's hazard check uses them) holds it until the oldest job of that queue ends. A
kernel operation's block dependency (NPU_SET_BLOCKDEP) lets its first blocks start while the
previous operation's last ones drain; Vela's per-operation formulas have no separate fill
or drain term to overlap, so successive kernel operations are timed back to back. Nor do
the engines share a memory's bandwidth: each job takes its own cost, as in Vela's estimate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0

from cascader.ethosu.vela_arch import vela_ini
from cascader.simulator.accelerator import accelerator_config
from cascader.simulator.commands import Command, decode_commands
from cascader.simulator.descriptors import Unsupported
from cascader.simulator.payload import parse_payload
from cascader.simulator.registers import RegisterFile
from cascader.timing.op_cost import KernelCost, SystemAreas, dma_cycles, kernel_cost

__all__ = [
    "CostedStream",
    "TimedJob",
    "TimedStream",
    "TimingError",
    "cost_stream",
    "payload_streams",
    "run_stream",
    "time_payload",
]

_KERNEL_OPS = {
    cmd0.NPU_OP_CONV.value,
    cmd0.NPU_OP_DEPTHWISE.value,
    cmd0.NPU_OP_POOL.value,
    cmd0.NPU_OP_ELEMENTWISE.value,
}
_FIRST_REGISTER = 0x100  # cmd0 opcodes from here on set registers


class TimingError(ValueError):
    """A command whose cost the registers do not determine (a value Vela's formulas or the
    region map cannot take); the message names the command."""


@dataclass(frozen=True)
class TimedJob:
    """One kernel operation or DMA: where it is in the stream, when it ran, and (kernels)
    its cost."""

    offset: int
    name: str
    start: float
    end: float
    cost: KernelCost | None = None


@dataclass
class TimedStream:
    """The cycles of a payload's streams run one after another, and every job's times.
    `per_op` says whose per-operation cycles the kernel jobs took: "legacy" (Vela's Python
    formulas, each command's own) or "regor" (the C++ core's per-layer report, spread over
    each layer's commands); `refusal` why regor's were asked for but not taken."""

    cycles: float = 0.0
    jobs: list[TimedJob] = field(default_factory=list)
    per_op: str = "legacy"
    refusal: str | None = None

    def busy(self, kernels: bool) -> float:
        """Cycles the kernel (or the DMA) engine is busy."""
        return sum(j.end - j.start for j in self.jobs if (j.cost is not None) == kernels)


class _Queue:
    """One engine's jobs in order: when it is next free and when its outstanding jobs end."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.free_at = 0.0
        self.ends: deque[float] = deque()

    def issue(self, now: float, cycles: float) -> tuple[float, float, float]:
        """Start a job issued at `now`: its start and end, and when the command processor
        may go on (later than `now` when the queue was full)."""
        start = max(now, self.free_at)
        self.free_at = start + cycles
        self.ends.append(self.free_at)
        while len(self.ends) > self.depth:
            now = max(now, self.ends.popleft())
        return start, self.free_at, now

    def wait(self, now: float, keep: int) -> float:
        """When at most `keep` jobs are left outstanding."""
        while len(self.ends) > keep:
            now = max(now, self.ends.popleft())
        return now


@dataclass(frozen=True)
class CostedStream:
    """One command stream's operations in order (up to NPU_OP_STOP) and what each job costs
    by its byte offset: a kernel operation's `KernelCost`, a DMA's cycles. Costing reads the
    registers as the stream sets them; running the stream then needs only these."""

    operations: list[Command]
    kernels: dict[int, KernelCost]
    dmas: dict[int, float]


def cost_stream(words: np.ndarray, areas: SystemAreas, cores: int) -> CostedStream:
    """Cost every job of one command stream (its 32-bit words) from its registers."""
    commands, _ = decode_commands(words)
    regs = RegisterFile()
    out = CostedStream([], {}, {})
    for command in commands:
        if command.is_cmd1 or command.code >= _FIRST_REGISTER:
            regs.set(command)
            continue
        if command.code == cmd0.NPU_OP_STOP.value:
            break
        out.operations.append(command)
        try:
            if command.code in _KERNEL_OPS:
                out.kernels[command.offset] = kernel_cost(
                    regs, command.code, command.param, areas, cores
                )
            elif command.code == cmd0.NPU_OP_DMA_START.value:
                out.dmas[command.offset] = dma_cycles(regs, areas)
        except Unsupported as error:
            raise TimingError(f"{command.name} at {command.offset:#06x}: {error}") from None
    return out


def run_stream(
    stream: CostedStream,
    accelerator: str,
    out: TimedStream,
    kernel_cycles: Mapping[int, float] | None = None,
) -> None:
    """Run one costed stream after what `out` holds, adding its jobs and its end to `out`.
    A kernel operation takes its cost's cycles, or `kernel_cycles[offset]` when given (the
    per-operation cycles of another model, e.g. regor's layers spread over their commands)."""
    config = accelerator_config(accelerator)
    kernels, dmas = _Queue(config.kernel_queue), _Queue(config.dma_queue)
    now = kernels.free_at = dmas.free_at = out.cycles
    for command in stream.operations:
        code, offset = command.code, command.offset
        if code in _KERNEL_OPS:
            cost = stream.kernels[offset]
            cycles = cost.cycles if kernel_cycles is None else kernel_cycles[offset]
            begin, end, now = kernels.issue(now, cycles)
            out.jobs.append(TimedJob(offset, command.name, begin, end, cost))
        elif code == cmd0.NPU_OP_DMA_START.value:
            begin, end, now = dmas.issue(now, stream.dmas[offset])
            out.jobs.append(TimedJob(offset, command.name, begin, end))
        elif code == cmd0.NPU_OP_KERNEL_WAIT.value:
            now = kernels.wait(now, command.param & 0xF)
        elif code == cmd0.NPU_OP_DMA_WAIT.value:
            now = dmas.wait(now, command.param & 0xF)
    out.cycles = max(now, kernels.free_at, dmas.free_at)


def payload_streams(command_stream: bytes, system: tuple) -> tuple[str, list[CostedStream]]:
    """The accelerator a driver payload names (else `system`'s) and its streams, costed on
    `system` (accelerator, system config, memory mode, vela.ini)."""
    payload = parse_payload(command_stream)
    accelerator = payload.accelerator or system[0]
    areas = SystemAreas.of((accelerator, *system[1:3], vela_ini(system[3])))
    cores = accelerator_config(accelerator).cores
    return accelerator, [cost_stream(words, areas, cores) for words in payload.streams]


def time_payload(command_stream: bytes, system: tuple) -> TimedStream:
    """The cycles of a command stream (Vela's driver payload, as an `ethos-u` operator holds
    it) on `system` (accelerator, system config, memory mode, vela.ini), its streams run
    one after another. The accelerator is the one the payload names."""
    accelerator, streams = payload_streams(command_stream, system)
    out = TimedStream()
    for stream in streams:
        run_stream(stream, accelerator, out)
    return out
