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
from dataclasses import dataclass, field

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0

from cascader.ethosu.vela_arch import vela_ini
from cascader.simulator.accelerator import accelerator_config
from cascader.simulator.commands import Command, decode_commands
from cascader.simulator.descriptors import Unsupported
from cascader.simulator.payload import parse_payload
from cascader.simulator.registers import RegisterFile
from cascader.timing.op_cost import KernelCost, SystemAreas, dma_cycles, kernel_cost

__all__ = ["TimedJob", "TimedStream", "TimingError", "time_payload"]

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
    """The cycles of a payload's streams run one after another, and every job's times."""

    cycles: float = 0.0
    jobs: list[TimedJob] = field(default_factory=list)

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


class _CommandProcessor:
    """Reads one stream's commands in order, issuing jobs to the two engines."""

    def __init__(self, areas: SystemAreas, accelerator: str, start: float, out: TimedStream):
        config = accelerator_config(accelerator)
        self.areas, self.cores, self.out = areas, config.cores, out
        self.regs = RegisterFile()
        self.kernels, self.dmas = _Queue(config.kernel_queue), _Queue(config.dma_queue)
        self.now = self.kernels.free_at = self.dmas.free_at = start

    def run(self, commands: list[Command]) -> float:
        """When the last job of the stream ends."""
        for command in commands:
            if command.is_cmd1 or command.code >= _FIRST_REGISTER:
                self.regs.set(command)
                continue
            if command.code == cmd0.NPU_OP_STOP.value:
                break
            try:
                self._operation(command)
            except Unsupported as error:
                raise TimingError(f"{command.name} at {command.offset:#06x}: {error}") from None
        return max(self.now, self.kernels.free_at, self.dmas.free_at)

    def _operation(self, command: Command) -> None:
        code, param = command.code, command.param
        if code in _KERNEL_OPS:
            cost = kernel_cost(self.regs, code, param, self.areas, self.cores)
            begin, end, self.now = self.kernels.issue(self.now, cost.cycles)
            self.out.jobs.append(TimedJob(command.offset, command.name, begin, end, cost))
        elif code == cmd0.NPU_OP_DMA_START.value:
            begin, end, self.now = self.dmas.issue(self.now, dma_cycles(self.regs, self.areas))
            self.out.jobs.append(TimedJob(command.offset, command.name, begin, end))
        elif code == cmd0.NPU_OP_KERNEL_WAIT.value:
            self.now = self.kernels.wait(self.now, param & 0xF)
        elif code == cmd0.NPU_OP_DMA_WAIT.value:
            self.now = self.dmas.wait(self.now, param & 0xF)


def time_payload(command_stream: bytes, system: tuple) -> TimedStream:
    """The cycles of a command stream (Vela's driver payload, as an `ethos-u` operator holds
    it) on `system` (accelerator, system config, memory mode, vela.ini), its streams run
    one after another. The accelerator is the one the payload names."""
    payload = parse_payload(command_stream)
    accelerator = payload.accelerator or system[0]
    areas = SystemAreas.of((accelerator, *system[1:3], vela_ini(system[3])))
    out = TimedStream()
    for words in payload.streams:
        commands, _ = decode_commands(words)
        out.cycles = _CommandProcessor(areas, accelerator, out.cycles, out).run(commands)
    return out
