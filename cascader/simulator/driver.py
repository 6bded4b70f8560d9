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

import numpy as np
import tflite

from cascader.simulator.errors import Finding, FindingKind
from cascader.simulator.payload import is_driver_payload, parse_payload

ALIGNMENT = 16
BASE_ADDRESSES = 8  # the kernel passes at most this many base addresses
_ETHOS_U = b"ethos-u"
_OFFLINE_ALLOCATION = b"OfflineMemoryAllocation"


def driver_refusals(raw: bytes) -> list[Finding]:
    """Each reason TFLite Micro's Ethos-U kernel or Arm's driver would refuse to run the
    `ethos-u` operators of the Vela-format model `raw` (empty when they would run them)."""
    base = np.frombuffer(raw, np.uint8)
    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    offsets = _offline_offsets(model, base)
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
        payload = _data(model, graph.Tensors(inputs[0]), base)
        if payload is None:
            found.append(_refusal(label, "its command-stream tensor holds no data"))
        else:
            found += _payload_refusals(label, *payload)
        for slot, t in enumerate([*inputs[1:], *outputs][:BASE_ADDRESSES]):
            if t >= 0:
                found += _base_refusals(label, slot, model, graph.Tensors(t), offsets.get(t), base)
    return found


def _payload_refusals(label: str, start: int, data: np.ndarray) -> list[Finding]:
    """The driver's checks of one payload that begins at file offset `start`."""
    raw = data.tobytes()
    if not is_driver_payload(raw):
        return [_refusal(label, 'its payload does not start with the fourcc "COP1"')]
    parsed = parse_payload(raw)
    found = [_refusal(label, f"its payload: {finding.message}") for finding in parsed.findings]
    for offset in parsed.stream_offsets:
        at = start + offset
        if at % ALIGNMENT:
            found.append(
                _refusal(
                    label,
                    f"its command stream is at file offset {at}, "
                    f"{at % ALIGNMENT} past a multiple of {ALIGNMENT}",
                )
            )
    return found


def _base_refusals(
    label: str,
    slot: int,
    model: tflite.Model,
    tensor: tflite.Tensor,
    offset: int | None,
    base: np.ndarray,
) -> list[Finding]:
    """The driver's checks of base address `slot` (0: read-only constants, 1: the arena, 2:
    the fast scratch, then the IFMs and OFMs)."""
    name = tensor.Name().decode(errors="replace")
    where = f"base address {slot} ({name})"
    data = _data(model, tensor, base)
    if data is not None:
        start, values = data
        found = []
        if start % ALIGNMENT:
            found.append(
                _refusal(
                    label,
                    f"{where} is read in place at file offset {start}, "
                    f"{start % ALIGNMENT} past a multiple of {ALIGNMENT}",
                )
            )
        size = math.prod(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else 1
        if size != len(values):
            found.append(
                _refusal(
                    label,
                    f"{where}: its shape gives the driver {size} bytes, its data is {len(values)}",
                )
            )
        return found
    if offset is not None and offset % ALIGNMENT:
        return [
            _refusal(
                label,
                f"{where} is at arena offset {offset}, {offset % ALIGNMENT} "
                f"past a multiple of {ALIGNMENT}",
            )
        ]
    return []


def _data(
    model: tflite.Model, tensor: tflite.Tensor, base: np.ndarray
) -> tuple[int, np.ndarray] | None:
    """Where a tensor's data starts in the file and its bytes, or None when it has none."""
    buffer = model.Buffers(tensor.Buffer())
    if buffer is None:
        return None
    if buffer.Offset() > 1:  # stored past the flatbuffer (models over 2 GiB)
        start = int(buffer.Offset())
        return start, base[start : start + int(buffer.Size())]
    if buffer.DataLength() == 0:
        return None
    values = buffer.DataAsNumpy()
    return values.ctypes.data - base.ctypes.data, values


def _offline_offsets(model: tflite.Model, base: np.ndarray) -> dict[int, int]:
    """The arena offset of each tensor of subgraph 0 the offline allocation places."""
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() != _OFFLINE_ALLOCATION:
            continue
        buffer = model.Buffers(entry.Buffer())
        if buffer is None or buffer.DataLength() < 12:
            return {}
        words = buffer.DataAsNumpy()[: buffer.DataLength() // 4 * 4].view("<i4")
        return {t: int(v) for t, v in enumerate(words[3:]) if v >= 0}
    return {}


def _refusal(label: str, message: str) -> Finding:
    return Finding(FindingKind.DRIVER_REFUSAL, -1, label, message)
