"""The command processor: register sets, operations, waits and the hazard check.

Commands run in stream order; an operation runs completely when issued. What the hardware
runs concurrently is tracked instead: kernel operations and DMAs stay outstanding (up to
the queue depths of the accelerator; issuing past a full queue waits for its oldest job)
until a KERNEL_WAIT / DMA_WAIT of n leaves only the n newest. A kernel touching bytes an
outstanding DMA writes (or writing bytes it reads), or a DMA doing so to an outstanding
kernel's bytes, is a hazard: the stream lacks a wait, as Vela's own dependency analysis
(`register_command_stream_util.get_wait_dependency`) would have inserted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0

from cascader.simulator.accelerator import AcceleratorConfig
from cascader.simulator.bounds import dma_excess, operation_excess
from cascader.simulator.commands import Command
from cascader.simulator.context import Access, OpContext
from cascader.simulator.convolution import run_convolution
from cascader.simulator.descriptors import Unsupported
from cascader.simulator.dma import run_dma
from cascader.simulator.elementwise import run_elementwise
from cascader.simulator.errors import Finding, FindingKind, SimulationError
from cascader.simulator.memory import SHRAM, Memory, Reporter
from cascader.simulator.output_stage import LUT_SLOT_BYTES
from cascader.simulator.pooling import run_pooling
from cascader.simulator.registers import RegisterFile

_BLOCK_OPS = {
    cmd0.NPU_OP_CONV.value,
    cmd0.NPU_OP_DEPTHWISE.value,
    cmd0.NPU_OP_POOL.value,
    cmd0.NPU_OP_ELEMENTWISE.value,
}
_NO_OPS = {cmd0.NPU_OP_IRQ.value, cmd0.NPU_OP_PMU_MASK.value}
_FIRST_REGISTER = 0x100  # cmd0 opcodes from here on set registers


@dataclass
class _Job:
    name: str
    offset: int
    accesses: list[Access]


class Machine:
    """Runs decoded commands over a memory; collects findings."""

    def __init__(self, memory: Memory, config: AcceleratorConfig, strict: bool = False) -> None:
        self.memory = memory
        self.config = config
        self.strict = strict
        self.regs = RegisterFile()
        self.findings: list[Finding] = []
        self._seen: set[tuple[int, FindingKind, str]] = set()
        self._command: Command | None = None
        self.reporter = Reporter(self._report)
        self.npu_ops = 0
        self.dma_ops = 0
        self.dma_unwritten_bytes = 0  # unwritten source bytes DMAs copied (carried as such)
        self.commands = 0
        self.stopped = False
        self._kernels: deque[_Job] = deque()
        self._dmas: deque[_Job] = deque()

    # ------------------------------------------------------------------ findings
    def _report(self, kind: FindingKind, message: str) -> None:
        command = self._command
        offset, name = (command.offset, command.name) if command else (-1, "stream")
        key = (offset, kind, message)
        if key in self._seen:
            return
        self._seen.add(key)
        finding = Finding(kind, offset, name, message)
        self.findings.append(finding)
        if self.strict:
            raise SimulationError(str(finding), finding)

    def add(self, finding: Finding) -> None:
        """A finding made before execution (decoding the stream)."""
        self.findings.append(finding)
        if self.strict:
            raise SimulationError(str(finding), finding)

    # ------------------------------------------------------------------ execution
    def run(self, commands: list[Command]) -> None:
        for command in commands:
            if self.stopped:
                self._command = command
                self._report(FindingKind.MALFORMED_STREAM, "command after NPU_OP_STOP ignored")
                break
            self._command = command
            self.commands += 1
            self._execute(command)
        self._command = None

    def finish(self) -> None:
        """End of all streams: report a missing STOP."""
        if not self.stopped:
            self._report(FindingKind.MALFORMED_STREAM, "the stream ends without NPU_OP_STOP")

    def _execute(self, command: Command) -> None:
        if not command.known:
            self._report(FindingKind.UNSUPPORTED, f"unknown opcode {command.code:#05x}")
            return
        if command.is_cmd1 or command.code >= _FIRST_REGISTER:
            self.regs.set(command)
            return
        code, param = command.code, command.param
        if code == cmd0.NPU_OP_STOP.value:
            self.stopped = True
        elif code in _NO_OPS:
            return
        elif code == cmd0.NPU_OP_KERNEL_WAIT.value:
            self._retire(self._kernels, param & 0xF)
        elif code == cmd0.NPU_OP_DMA_WAIT.value:
            self._retire(self._dmas, param & 0xF)
        elif code == cmd0.NPU_OP_DMA_START.value:
            self._dma(command)
        elif code in _BLOCK_OPS:
            self._block_op(command)
        else:  # every cmd0 opcode of the register map is handled above
            self._report(FindingKind.UNSUPPORTED, f"operation {command.name} not simulated")

    def _context(self) -> OpContext:
        return OpContext(self.regs, self.memory, self.config, self.reporter)

    def _block_op(self, command: Command) -> None:
        ctx = self._context()
        code = command.code
        excess = operation_excess(self.regs, self.memory, code == cmd0.NPU_OP_ELEMENTWISE.value)
        if excess is not None:
            self._report(FindingKind.OUT_OF_REGION, f"not executed: it asks for {excess}")
            return
        try:
            if code == cmd0.NPU_OP_CONV.value:
                done = run_convolution(ctx, depthwise=False)
            elif code == cmd0.NPU_OP_DEPTHWISE.value:
                done = run_convolution(ctx, depthwise=True)
            elif code == cmd0.NPU_OP_POOL.value:
                run_pooling(ctx, command.param)
                done = True
            else:
                run_elementwise(ctx, command.param)
                done = True
        except Unsupported as error:
            self._report(FindingKind.UNSUPPORTED, f"cannot execute: {error}")
            return
        if done:
            self.npu_ops += 1
        self._check(ctx.accesses, self._dmas, "DMA")
        self._issue(
            self._kernels,
            self.config.kernel_queue,
            _Job(command.name, command.offset, ctx.accesses),
        )
        if self.config.lut_shares_banks and not self._uses_lut():
            # Without spare SHRAM banks an operation's buffers may overwrite the LUT.
            lut = self.memory.regions[SHRAM]
            lut.written[self.config.lut_base : self.config.lut_base + 8 * LUT_SLOT_BYTES] = False

    def _uses_lut(self) -> bool:
        return 16 <= (self.regs.param(cmd0.NPU_SET_ACTIVATION) & 0xFFF) <= 23

    def _dma(self, command: Command) -> None:
        ctx = self._context()
        excess = dma_excess(self.regs, self.memory)
        if excess is not None:
            self._report(FindingKind.OUT_OF_REGION, f"not executed: it asks for {excess}")
            return
        try:
            read, write, unwritten = run_dma(ctx, command.param)
        except Unsupported as error:
            self._report(FindingKind.UNSUPPORTED, f"cannot execute: {error}")
            return
        self.dma_ops += 1
        self.dma_unwritten_bytes += unwritten
        accesses = [read, write]
        self._check(accesses, self._kernels, "kernel")
        self._issue(self._dmas, self.config.dma_queue, _Job(command.name, command.offset, accesses))

    # ------------------------------------------------------------------ hazards
    @staticmethod
    def _issue(queue: deque[_Job], depth: int, job: _Job) -> None:
        queue.append(job)
        while len(queue) > depth:
            queue.popleft()

    @staticmethod
    def _retire(queue: deque[_Job], keep: int) -> None:
        while len(queue) > keep:
            queue.popleft()

    def _check(self, accesses: list[Access], queue: deque[_Job], kind: str) -> None:
        for job in queue:
            for mine in accesses:
                for theirs in job.accesses:
                    if (mine.write or theirs.write) and mine.overlaps(theirs):
                        self._report(
                            FindingKind.HAZARD,
                            f"{mine.what} {'writes' if mine.write else 'reads'} bytes the "
                            f"outstanding {kind} {job.name}@{job.offset:#06x} "
                            f"{'writes' if theirs.write else 'reads'} ({theirs.what}); a wait "
                            f"is missing",
                        )
