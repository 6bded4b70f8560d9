"""Register commands as the NPU's command processor reads them.

Each command's first word holds a 10-bit opcode, 4 bits that must be zero, a 2-bit payload
size and a 16-bit parameter. Size 0 is a cmd0 command (an operation or a register set from
the parameter); size 1 is a cmd1 command whose next word is a 32-bit value (addresses use
the parameter's low byte as bits 32-39 on Ethos-U65). Opcode names are Vela's own register
map (`ethos_u55_regs.cmd0` / `cmd1`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from cascader.simulator.errors import Finding, FindingKind

_CMD0_NAMES = {op.value: op.name for op in cmd0}
_CMD1_NAMES = {op.value: op.name for op in cmd1}


@dataclass(frozen=True, slots=True)
class Command:
    """One decoded command: where it sits, what it is, its parameter and payload."""

    offset: int  # byte offset in the register command stream
    code: int  # 10-bit opcode
    is_cmd1: bool
    param: int  # 16-bit parameter
    data: int = 0  # 32-bit payload of a cmd1 command

    @property
    def known(self) -> bool:
        return self.code in (_CMD1_NAMES if self.is_cmd1 else _CMD0_NAMES)

    @property
    def name(self) -> str:
        names = _CMD1_NAMES if self.is_cmd1 else _CMD0_NAMES
        kind = "CMD1" if self.is_cmd1 else "CMD0"
        return names.get(self.code, f"UNKNOWN_{kind}_{self.code:#05x}")


def decode_commands(words: np.ndarray) -> tuple[list[Command], list[Finding]]:
    """Every command of a register stream, in order, and what is malformed about it."""
    commands: list[Command] = []
    findings: list[Finding] = []
    values = [int(w) for w in words]
    i = 0
    while i < len(values):
        word = values[i]
        code, zeros, size, param = word & 0x3FF, (word >> 10) & 0xF, (word >> 14) & 0x3, word >> 16
        offset = 4 * i
        if zeros:
            findings.append(
                Finding(
                    FindingKind.MALFORMED_STREAM,
                    offset,
                    f"word {word:#010x}",
                    "bits 10-13 of a command must be zero",
                )
            )
        if size == 0:
            commands.append(Command(offset, code, False, param))
            i += 1
            continue
        if i + size >= len(values):
            findings.append(
                Finding(
                    FindingKind.MALFORMED_STREAM,
                    offset,
                    Command(offset, code, True, param).name,
                    f"stream ends inside a command with a {size}-word payload",
                )
            )
            break
        command = Command(offset, code, True, param, values[i + 1])
        if size != 1:
            findings.append(
                Finding(
                    FindingKind.UNSUPPORTED,
                    offset,
                    command.name,
                    f"payload of {size} words (Ethos-U55/U65 commands carry one)",
                )
            )
        commands.append(command)
        i += 1 + size
    return commands, findings
