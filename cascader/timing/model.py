"""The timed cycles of a Vela-format .tflite (Vela's `_vela.tflite` or `dse compile`'s
`_dse.tflite`): the command streams of its `ethos-u` operators, each its operator's first
input, timed one after another on a system from vela.ini."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import tflite

from cascader.ethosu.defaults import system_defaults
from cascader.ethosu.vela_arch import DEFAULT_VELA_INI
from cascader.simulator.payload import parse_payload
from cascader.timing.regor_layers import LayerCycles, LayersRefused, layer_kernel_cycles
from cascader.timing.timeline import (
    CostedStream,
    TimedStream,
    TimingError,
    payload_streams,
    run_stream,
)

__all__ = ["ethos_u_payloads", "time_model"]

_ETHOS_U = b"ethos-u"


def _buffer(model: tflite.Model, raw: bytes, index: int) -> bytes:
    buffer = model.Buffers(index)
    if buffer is None:
        return b""
    if buffer.Offset() > 1:  # stored past the flatbuffer (models over 2 GiB)
        return raw[buffer.Offset() : buffer.Offset() + buffer.Size()]
    return buffer.DataAsNumpy().tobytes() if buffer.DataLength() else b""


def ethos_u_payloads(raw: bytes) -> list[bytes]:
    """The driver payload of every `ethos-u` operator of the main subgraph, in order."""
    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    payloads = []
    for o in range(graph.OperatorsLength()):
        op = graph.Operators(o)
        if model.OperatorCodes(op.OpcodeIndex()).CustomCode() == _ETHOS_U:
            tensor = graph.Tensors(int(op.Inputs(0)))
            payloads.append(_buffer(model, raw, tensor.Buffer()))
    return payloads


def time_model(
    raw: bytes,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_path: Path = DEFAULT_VELA_INI,
    layers: LayerCycles | None = None,
) -> TimedStream:
    """The timed cycles of every `ethos-u` operator's streams, one after another, on the
    accelerator the payloads name (the family's default system config and memory mode when
    not given). Host operators between them are not timed; job times count from the first
    operator's start. With `layers` (regor's report of the compile that wrote `raw`) the
    kernel jobs take regor's per-layer cycles (`regor_layers`); where those do not map onto
    the file's commands the legacy formulas stay and the result says why (`refusal`)."""
    streams: list[tuple[str, CostedStream]] = []
    for payload in ethos_u_payloads(raw):
        accelerator = parse_payload(payload).accelerator
        if accelerator is None:
            raise TimingError("an ethos-u operator's payload names no Ethos-U55/U65 accelerator")
        config, mode = system_defaults(accelerator, system_config, memory_mode)
        found, costed = payload_streams(payload, (accelerator, config, mode, config_path))
        streams += [(found, stream) for stream in costed]
    total = TimedStream()
    kernel_cycles: Sequence[Mapping[int, float] | None] = [None] * len(streams)
    if layers is not None:
        try:
            kernel_cycles = layer_kernel_cycles(layers, [s for _, s in streams])
            total.per_op = "regor"
        except LayersRefused as refused:
            total.refusal = str(refused)
    for (accelerator, stream), cycles in zip(streams, kernel_cycles, strict=True):
        run_stream(stream, accelerator, total, cycles)
    return total
