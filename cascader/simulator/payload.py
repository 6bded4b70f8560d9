"""Vela's driver payload: the bytes of an `ethos-u` custom operator's command-stream tensor.

The payload is a list of little-endian 32-bit driver actions: the fourcc "COP1", a CONFIG
action (the NPU's CONFIG and ID register values Vela compiled for), NOPs aligning the stream
to 16 bytes, and a COMMAND_STREAM action whose 24-bit length (in words) is split between the
tag's reserved byte and its parameter, followed by the register command stream itself
(`ethosu.vela.driver_actions`). A raw register stream has no fourcc and is taken whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cascader.simulator.errors import Finding, FindingKind

_FOURCC = int.from_bytes(b"COP1", "little")
_CONFIG, _CMD_STREAM, _READ_APB, _DUMP_SHRAM, _NOP = 0x01, 0x02, 0x03, 0x04, 0x05
_PRODUCTS = {0: "ethos-u55", 1: "ethos-u65"}
_UNSIMULATED = {2: "Ethos-U85"}  # products a payload may name that the simulator does not run


@dataclass(frozen=True)
class DriverPayload:
    """The register command streams of a payload and what its CONFIG action says."""

    streams: tuple[np.ndarray, ...]  # uint32 words of each COMMAND_STREAM action
    config_word: int | None = None
    id_word: int | None = None
    findings: tuple[Finding, ...] = field(default=())
    stream_offsets: tuple[int, ...] = ()  # byte offset of each stream in the payload

    @property
    def unsimulated_product(self) -> str | None:
        """The NPU the CONFIG register value names when the simulator does not run it."""
        return None if self.config_word is None else _UNSIMULATED.get(self.config_word >> 28)

    @property
    def accelerator(self) -> str | None:
        """The accelerator named by the CONFIG register value (e.g. ethos-u55-256)."""
        if self.config_word is None:
            return None
        product = _PRODUCTS.get(self.config_word >> 28)
        macs = 1 << (self.config_word & 0xF)
        return None if product is None else f"{product}-{macs}"


def is_driver_payload(data: bytes) -> bool:
    return len(data) >= 4 and int.from_bytes(data[:4], "little") == _FOURCC


def _words(data: bytes) -> tuple[np.ndarray, list[Finding]]:
    findings = []
    if len(data) % 4:
        findings.append(
            Finding(
                FindingKind.MALFORMED_STREAM,
                -1,
                "payload",
                f"{len(data)} bytes is not a whole number of 32-bit words; "
                f"the last {len(data) % 4} bytes are ignored",
            )
        )
    usable = len(data) - len(data) % 4
    return np.frombuffer(data[:usable], dtype="<u4").astype(np.uint32), findings


def parse_payload(data: bytes) -> DriverPayload:
    """The streams of a driver payload, or of a raw register stream (one stream)."""
    words, findings = _words(data)
    if not is_driver_payload(data):
        return DriverPayload((words,), findings=tuple(findings))
    streams: list[np.ndarray] = []
    offsets: list[int] = []
    config = ident = None
    i = 1
    while i < len(words):
        tag = int(words[i])
        action, reserved, param = tag & 0xFF, (tag >> 8) & 0xFF, tag >> 16
        i += 1
        if action == _CONFIG:
            if i + 2 > len(words):
                findings.append(_malformed("CONFIG action cut short"))
                break
            config, ident = int(words[i]), int(words[i + 1])
            i += 2
        elif action == _CMD_STREAM:
            length = (reserved << 16) | param
            if i + length > len(words):
                findings.append(
                    _malformed(f"COMMAND_STREAM action of {length} words has only {len(words) - i}")
                )
                length = len(words) - i
            streams.append(words[i : i + length])
            offsets.append(4 * i)
            i += length
        elif action in (_READ_APB, _DUMP_SHRAM, _NOP):
            continue  # debug actions of the driver, nothing for the NPU to run
        else:
            findings.append(_malformed(f"unknown driver action {action:#x} at word {i - 1}"))
            break
    if not streams:
        findings.append(_malformed("payload has no COMMAND_STREAM action"))
    return DriverPayload(tuple(streams), config, ident, tuple(findings), tuple(offsets))


def _malformed(message: str) -> Finding:
    return Finding(FindingKind.MALFORMED_STREAM, -1, "payload", message)


def replace_stream(payload: bytes, words: np.ndarray | list[int]) -> bytes:
    """The driver payload with its (single) command stream replaced: same header, the
    COMMAND_STREAM length updated. A raw stream is simply replaced."""
    stream = np.asarray(words, dtype=np.uint32).astype("<u4").tobytes()
    if not is_driver_payload(payload):
        return stream
    head, _ = _words(payload)
    i = 1
    while i < len(head):
        tag = int(head[i])
        action, reserved, param = tag & 0xFF, (tag >> 8) & 0xFF, tag >> 16
        if action == _CMD_STREAM:
            length = len(stream) // 4
            new_tag = _CMD_STREAM | ((length >> 16) & 0xFF) << 8 | (length & 0xFFFF) << 16
            old_length = (reserved << 16) | param
            rest = head[i + 1 + old_length :].astype("<u4").tobytes()
            prefix = head[:i].astype("<u4").tobytes()
            return prefix + int(new_tag).to_bytes(4, "little") + stream + rest
        i += 3 if action == _CONFIG else 1
    raise ValueError("payload has no COMMAND_STREAM action")
