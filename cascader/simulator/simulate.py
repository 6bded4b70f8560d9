"""`simulate`: run a register command stream (raw, or Vela's driver payload) on region images."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cascader.simulator.accelerator import accelerator_config
from cascader.simulator.commands import decode_commands
from cascader.simulator.errors import Finding, FindingKind, SimulationError
from cascader.simulator.machine import Machine
from cascader.simulator.memory import SHRAM, Memory, RegionImage
from cascader.simulator.payload import parse_payload


@dataclass
class SimulationResult:
    """Final region images (the same aliasing as given), SHRAM, counts and findings."""

    regions: dict[int, RegionImage]
    shram: RegionImage
    accelerator: str
    npu_ops: int  # kernel operations executed (conv, depthwise, pool, elementwise)
    dma_ops: int
    commands: int
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    dma_unwritten_bytes: int = 0  # bytes DMAs copied that nothing had written (not an error)

    @property
    def ok(self) -> bool:
        return not self.findings

    def findings_of(self, kind: FindingKind) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]


def _copy_regions(regions: Mapping[int, RegionImage]) -> dict[int, RegionImage]:
    """Copies that keep two base pointers on one image (scratch = fast scratch) aliased."""
    copies: dict[int, RegionImage] = {}
    result = {}
    for index, image in regions.items():
        if id(image) not in copies:
            copies[id(image)] = image.copy()
        result[index] = copies[id(image)]
    return result


def simulate(
    command_stream: bytes | np.ndarray,
    regions: Mapping[int, RegionImage],
    accelerator: str | None = None,
    *,
    shram: RegionImage | None = None,
    strict: bool = False,
    copy: bool = True,
) -> SimulationResult:
    """Execute a command stream on the driver's regions (base-pointer index -> image).

    `command_stream` is Vela's driver payload (it starts with "COP1") or raw register
    commands; `accelerator` (e.g. "ethos-u55-256") defaults to the one the payload was
    compiled for. Regions are copied unless `copy` is False (then they are updated in
    place). With `strict`, the first finding raises `SimulationError`.
    """
    started = time.perf_counter()
    data = (
        command_stream.tobytes()
        if isinstance(command_stream, np.ndarray)
        else bytes(command_stream)
    )
    payload = parse_payload(data)
    name = accelerator or payload.accelerator
    if name is None and payload.unsimulated_product is not None:
        raise SimulationError(
            f"the stream is for an {payload.unsimulated_product}, which the simulator does not "
            "run (it runs Ethos-U55 and Ethos-U65 streams)"
        )
    if name is None:
        raise SimulationError("a raw command stream needs the accelerator named")
    config = accelerator_config(name)
    images = _copy_regions(regions) if copy else dict(regions)
    if SHRAM in images:
        raise SimulationError(f"region key {SHRAM} is reserved for SHRAM")
    internal = shram.copy() if shram is not None else RegionImage.empty(config.shram_bytes)
    machine = Machine(Memory(images, internal), config, strict)
    for finding in payload.findings:
        machine.add(finding)
    if accelerator and payload.accelerator and payload.accelerator != accelerator:
        machine.add(
            Finding(
                FindingKind.UNSUPPORTED,
                -1,
                "payload",
                f"compiled for {payload.accelerator}, simulated as {accelerator}",
            )
        )
    for words in payload.streams:
        commands, findings = decode_commands(words)
        for finding in findings:
            machine.add(finding)
        machine.stopped = False
        machine.run(commands)
        machine.finish()
    return SimulationResult(
        regions=images,
        shram=internal,
        accelerator=name,
        npu_ops=machine.npu_ops,
        dma_ops=machine.dma_ops,
        commands=machine.commands,
        findings=machine.findings,
        seconds=time.perf_counter() - started,
        dma_unwritten_bytes=machine.dma_unwritten_bytes,
    )
