"""The NPU's register file: the last value each set-register command wrote.

Vela leaves out a register write whose value has not changed since the last one, so an
operation reads whatever an earlier command left; registers never written read as 0, their
reset value. Values are kept raw; `descriptors` gives them meaning.
"""

from __future__ import annotations

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from cascader.simulator.commands import Command


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


class RegisterFile:
    """cmd0 parameters and cmd1 (parameter, payload) pairs by opcode."""

    def __init__(self) -> None:
        self._cmd0: dict[int, int] = {}
        self._cmd1: dict[int, tuple[int, int]] = {}

    def set(self, command: Command) -> None:
        if command.is_cmd1:
            self._cmd1[command.code] = (command.param, command.data)
        else:
            self._cmd0[command.code] = command.param

    def param(self, register: cmd0) -> int:
        """The 16-bit parameter of a cmd0 register, unsigned."""
        return self._cmd0.get(register.value, 0)

    def signed_param(self, register: cmd0) -> int:
        return _signed(self.param(register), 16)

    def value(self, register: cmd1) -> int:
        """The 32-bit payload of a cmd1 register, unsigned."""
        return self._cmd1.get(register.value, (0, 0))[1]

    def signed_value(self, register: cmd1) -> int:
        return _signed(self.value(register), 32)

    def cmd1_param(self, register: cmd1) -> int:
        """The 16-bit parameter of a cmd1 register (a shift, or address bits 32-47)."""
        return self._cmd1.get(register.value, (0, 0))[0]

    def address(self, register: cmd1) -> int:
        """A 48-bit signed address or stride: payload, parameter as bits 32-47 (Vela writes
        `value >> 32` there, so a negative value has all parameter bits set)."""
        param, data = self._cmd1.get(register.value, (0, 0))
        return _signed((param << 32) | data, 48)
