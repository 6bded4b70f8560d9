"""What stands between a Vela-format `.tflite` and the NPU on a device: the checks TensorFlow
Lite Micro's Ethos-U kernel and Arm's Ethos-U core driver apply before they start a command
stream. The simulator runs streams from memory images and so cannot see these; a file that
fails one runs here and is refused on the device.

Per `ethos-u` operator, as the kernel hands it to the driver:
- the payload (input 0) starts with the fourcc "COP1", is a whole number of 32-bit words, and
  its driver actions fit in it (`parse_payload`);
- the register stream of its COMMAND_STREAM action starts at a multiple of 16 bytes (the
  payload's data in the model, which TFLite Micro reads in place, plus the action's offset);
- every base address (inputs 1.. then the outputs, the first eight) is a multiple of 16: a
  tensor with data is read in place from the model, so its data's offset in the file counts; a
  tensor the `OfflineMemoryAllocation` places is at the arena (16-byte aligned) plus its
  offset; a tensor TFLite Micro plans itself it aligns to 16;
- the size the kernel passes for a base address is the product of the tensor's dimensions, so
  a tensor with data must hold exactly that many bytes.
The model itself must be loaded at a 16-byte aligned address (the firmware's part)."""

from __future__ import annotations

import math

import tflite

from cascader.simulator.errors import Finding, FindingKind
from cascader.simulator.payload import is_driver_payload, parse_payload
from cascader.simulator.tflite_runner import buffer_span, offline_offsets

ALIGNMENT = 16
BASE_ADDRESSES = 8  # the kernel passes at most this many base addresses
_ETHOS_U = b"ethos-u"


def driver_refusals(raw: bytes) -> list[Finding]:
    """Each reason TFLite Micro's Ethos-U kernel or Arm's driver would refuse to run the
    `ethos-u` operators of the Vela-format model `raw` (empty when they would run them)."""
    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    offsets = offline_offsets(model, raw, graph.TensorsLength())
    found: list[Finding] = []
    for o in range(graph.OperatorsLength()):
        op = graph.Operators(o)
        code = model.OperatorCodes(op.OpcodeIndex())
        if code.CustomCode() != _ETHOS_U:
            continue
        label = f"ethos-u#{o}"
        inputs = [int(t) for t in op.InputsAsNumpy()]
        outputs = [int(t) for t in op.OutputsAsNumpy()]
        if not inputs:
            found.append(_refusal(label, "it has no command-stream input"))
            continue
        payload = buffer_span(model, raw, graph.Tensors(inputs[0]).Buffer())
        if payload is None:
            found.append(_refusal(label, "its command-stream tensor holds no data"))
        else:
            found += _payload_refusals(label, *payload)
        for slot, t in enumerate([*inputs[1:], *outputs][:BASE_ADDRESSES]):
            if t >= 0:
                span = buffer_span(model, raw, graph.Tensors(t).Buffer())
                found += _base_refusals(label, slot, graph.Tensors(t), span, offsets[t])
    return found


def _payload_refusals(label: str, start: int, raw: bytes) -> list[Finding]:
    """The driver's checks of one payload that begins at file offset `start`."""
    if not is_driver_payload(raw):
        return [_refusal(label, 'its payload does not start with the fourcc "COP1"')]
    parsed = parse_payload(raw)
    found = [_refusal(label, f"its payload: {finding.message}") for finding in parsed.findings]
    for offset in parsed.stream_offsets:
        if (start + offset) % ALIGNMENT:
            found.append(
                _refusal(label, f"its command stream is at file offset {_past(start + offset)}")
            )
    return found


def _base_refusals(
    label: str, slot: int, tensor: tflite.Tensor, span: tuple[int, bytes] | None, offset: int
) -> list[Finding]:
    """The driver's checks of base address `slot` (0: read-only constants, 1: the arena, 2:
    the fast scratch, then the IFMs and OFMs): `span` is where the tensor's data is in the
    file, `offset` its arena offset (-1: TFLite Micro plans it, aligned)."""
    where = f"base address {slot} ({tensor.Name().decode(errors='replace')})"
    if span is None:
        if offset >= 0 and offset % ALIGNMENT:
            return [_refusal(label, f"{where} is at arena offset {_past(offset)}")]
        return []
    start, data = span
    found = []
    if start % ALIGNMENT:
        found.append(_refusal(label, f"{where} is read in place at file offset {_past(start)}"))
    size = math.prod(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else 1
    if size != len(data):
        found.append(
            _refusal(
                label, f"{where}: its shape gives the driver {size} bytes, its data is {len(data)}"
            )
        )
    return found


def _past(at: int) -> str:
    """`at`, with how far it is past a multiple of the alignment."""
    return f"{at}, {at % ALIGNMENT} past a multiple of {ALIGNMENT}"


def _refusal(label: str, message: str) -> Finding:
    return Finding(FindingKind.DRIVER_REFUSAL, -1, label, message)
