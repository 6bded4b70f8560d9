"""Run a Vela-compiled .tflite (as Vela writes `<model>_vela.tflite`) on the simulator.

How the driver's regions are set up for each `ethos-u` custom operator, whose inputs are
(command stream, read-only constants, scratch, fast scratch, IFMs...) and outputs the OFMs:
- region 0: the constant tensor's bytes (flash), all initialised;
- region 1: the tensor arena. TFLite Micro places every tensor the `OfflineMemoryAllocation`
  metadata gives an offset at arena + offset, the scratch tensor at offset 0, so region 1
  starts at the arena and spans the scratch tensor and every placed tensor (the model's
  inputs and outputs among them). Nothing in it is initialised but the inputs written in;
  it persists from one `ethos-u` operator to the next, as the arena does;
- region 2: the fast scratch. When the operator passes the scratch tensor itself (Vela's
  C++ core on Shared_Sram) it is region 1 again; a distinct fast-scratch tensor of nonzero
  size is the driver's separate fast memory (Ethos-U65 Dedicated_Sram), of that size,
  uninitialised; of size 0 it is an empty region (any use is out of region);
- regions 3 and up (the IFM/OFM base pointers TFLite Micro also passes) are not set up:
  Vela's streams address feature maps through region 1, and a use of them is reported;
- SHRAM starts unwritten for every operator.
Inputs are written NHWC at their offsets; outputs are read back from theirs, and any byte
of an output no command wrote is reported.

Operators other than `ethos-u` run through a `HostOpRunner` (none by default: such a model
is refused). A runner gets the operator and its input arrays and returns its outputs; the
values move through the arena for placed tensors and through a dictionary otherwise, so a
LiteRT-backed runner can later execute host operators between NPU ones.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import numpy as np
import tflite

from cascader.simulator.errors import Finding, FindingKind, SimulationError
from cascader.simulator.memory import RegionImage
from cascader.simulator.simulate import SimulationResult, simulate
from cascader.simulator.tensors import TensorPlacement, read_tensor, write_tensor

_ETHOS_U = b"ethos-u"
_DTYPES = {
    tflite.TensorType.INT8: "int8",
    tflite.TensorType.UINT8: "uint8",
    tflite.TensorType.INT16: "int16",
    tflite.TensorType.INT32: "int32",
    tflite.TensorType.FLOAT32: "float32",
    tflite.TensorType.INT64: "int64",
    tflite.TensorType.BOOL: "bool",
}
_BUILTIN_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
ARENA, FLASH, FAST_SCRATCH = 1, 0, 2


@dataclass(frozen=True)
class TensorInfo:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int | None  # byte offset in the arena, None when not placed there
    data: bytes | None  # constant contents

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class OperatorInfo:
    index: int
    kind: str  # "ethos-u", or the builtin operator's name
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class VelaModel:
    """The main subgraph of a Vela output file: tensors, operators, graph I/O, arena size."""

    tensors: tuple[TensorInfo, ...]
    operators: tuple[OperatorInfo, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    arena_bytes: int

    @classmethod
    def parse(cls, data: bytes) -> VelaModel:
        return _parse(data)


class HostOpRunner(Protocol):
    """Runs one non-NPU operator on its input values."""

    def __call__(
        self, model: VelaModel, operator: OperatorInfo, inputs: list[np.ndarray]
    ) -> list[np.ndarray]: ...


@dataclass
class VelaRunResult:
    outputs: list[np.ndarray]
    findings: list[Finding] = field(default_factory=list)
    npu_ops: int = 0
    dma_ops: int = 0
    dma_unwritten_bytes: int = 0
    ethos_u_ops: int = 0
    seconds: float = 0.0
    runs: list[SimulationResult] = field(default_factory=list)


def buffer_span(model: tflite.Model, raw: bytes, index: int) -> tuple[int, bytes] | None:
    """Where buffer `index`'s data starts in the file `raw` (which `model` was read from) and
    its bytes; None when it holds none."""
    buffer = model.Buffers(index)
    if buffer is None:
        return None
    if buffer.Offset() > 1:  # stored past the flatbuffer (models over 2 GiB)
        start = int(buffer.Offset())
        return start, raw[start : start + int(buffer.Size())]
    if buffer.DataLength() == 0:
        return None
    values = buffer.DataAsNumpy()  # a view into `raw`
    return values.ctypes.data - np.frombuffer(raw, np.uint8).ctypes.data, values.tobytes()


def _buffer(model: tflite.Model, raw: bytes, index: int) -> bytes | None:
    span = buffer_span(model, raw, index)
    return None if span is None else span[1]


def offline_offsets(model: tflite.Model, raw: bytes, tensors: int) -> list[int]:
    """The `OfflineMemoryAllocation` arena offset of each of the first `tensors` tensors of
    subgraph 0, -1 for one TFLite Micro plans itself."""
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() == b"OfflineMemoryAllocation":
            data = _buffer(model, raw, entry.Buffer()) or b""
            words = np.frombuffer(data[: len(data) // 4 * 4], "<i4")
            found = [int(v) for v in words[3 : 3 + tensors]]
            return found + [-1] * (tensors - len(found))
    return [-1] * tensors


def _parse(raw: bytes) -> VelaModel:
    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    offsets = offline_offsets(model, raw, graph.TensorsLength())
    tensors = []
    for t in range(graph.TensorsLength()):
        tensor = graph.Tensors(t)
        if tensor.Type() not in _DTYPES:
            raise SimulationError(f"tensor {t}: TFLite type {tensor.Type()} not supported")
        shape = tuple(int(v) for v in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
        offset = offsets[t] if t < len(offsets) and offsets[t] >= 0 else None
        tensors.append(
            TensorInfo(
                index=t,
                name=tensor.Name().decode(),
                shape=shape,
                dtype=_DTYPES[tensor.Type()],
                offset=offset,
                data=_buffer(model, raw, tensor.Buffer()),
            )
        )
    operators = []
    for o in range(graph.OperatorsLength()):
        op = graph.Operators(o)
        code = model.OperatorCodes(op.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        custom = code.CustomCode()
        if builtin == tflite.BuiltinOperator.CUSTOM and custom == _ETHOS_U:
            kind = "ethos-u"
        else:
            kind = _BUILTIN_NAMES.get(builtin, str(builtin))
        operators.append(
            OperatorInfo(
                o,
                kind,
                tuple(int(v) for v in op.InputsAsNumpy()),
                tuple(int(v) for v in op.OutputsAsNumpy()),
            )
        )
    placed = [t.offset + t.nbytes for t in tensors if t.offset is not None]
    return VelaModel(
        tensors=tuple(tensors),
        operators=tuple(operators),
        inputs=tuple(int(v) for v in graph.InputsAsNumpy()),
        outputs=tuple(int(v) for v in graph.OutputsAsNumpy()),
        arena_bytes=max(placed, default=0),
    )


class _Values:
    """Tensor values between operators: the arena for placed tensors, else a dictionary."""

    def __init__(self, model: VelaModel) -> None:
        self.model = model
        self.arena = RegionImage.empty(model.arena_bytes)
        self.loose: dict[int, np.ndarray] = {}

    def placement(self, tensor: TensorInfo) -> TensorPlacement:
        assert tensor.offset is not None
        return TensorPlacement(ARENA, tensor.offset, tensor.shape or (1,), tensor.dtype)

    def put(self, index: int, values: np.ndarray) -> None:
        tensor = self.model.tensors[index]
        array = np.asarray(values)
        if array.size != math.prod(tensor.shape):
            raise SimulationError(f"{tensor.name}: {array.shape} values for {tensor.shape}")
        if tensor.offset is not None:
            write_tensor(self.arena, self.placement(tensor), array.astype(tensor.dtype))
        else:
            self.loose[index] = array.astype(tensor.dtype).reshape(tensor.shape)

    def get(self, index: int) -> tuple[np.ndarray, bool]:
        tensor = self.model.tensors[index]
        if tensor.offset is not None:
            return read_tensor(self.arena, self.placement(tensor))
        if index in self.loose:
            return self.loose[index], True
        if tensor.data is not None:
            values = np.frombuffer(tensor.data, np.dtype(tensor.dtype).newbyteorder("<"))
            return values.reshape(tensor.shape).astype(tensor.dtype), True
        raise SimulationError(f"{tensor.name}: no value (not placed, not constant, not computed)")


def _regions(model: VelaModel, op: OperatorInfo, values: _Values, fast: dict[int, RegionImage]):
    if len(op.inputs) < 4:
        raise SimulationError(f"ethos-u operator {op.index}: {len(op.inputs)} inputs, needs 4+")
    stream, flash, scratch, scratch_fast = (model.tensors[i] for i in op.inputs[:4])
    if stream.data is None:
        raise SimulationError(f"ethos-u operator {op.index}: empty command stream")
    regions: dict[int, RegionImage] = {
        FLASH: RegionImage.from_bytes(flash.data or b""),
        ARENA: values.arena,
    }
    if scratch.offset not in (None, 0):
        raise SimulationError(f"scratch tensor {scratch.name} at arena offset {scratch.offset}")
    if scratch_fast.index == scratch.index:
        regions[FAST_SCRATCH] = values.arena
    else:
        if scratch_fast.index not in fast:
            fast[scratch_fast.index] = RegionImage.empty(scratch_fast.nbytes)
        regions[FAST_SCRATCH] = fast[scratch_fast.index]
    return stream.data, regions


def run_vela_tflite(
    model: bytes | Path | VelaModel,
    inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
    accelerator: str | None = None,
    *,
    host: HostOpRunner | None = None,
    strict: bool = False,
    command_streams: Mapping[int, bytes] | None = None,
) -> VelaRunResult:
    """Run every operator of the model on one set of inputs; returns its outputs.
    `command_streams` replaces the payload of `ethos-u` operators by operator index (fault
    injection, or a stream from another code generator over the same buffers)."""
    started = time.perf_counter()
    if isinstance(model, Path):
        model = model.read_bytes()
    parsed = model if isinstance(model, VelaModel) else VelaModel.parse(bytes(model))
    values = _Values(parsed)
    names = [parsed.tensors[i].name for i in parsed.inputs]
    if isinstance(inputs, Mapping):
        missing = set(names) - set(inputs)
        if missing:
            raise SimulationError(f"no value for inputs {sorted(missing)}")
        ordered = [inputs[n] for n in names]
    else:
        if len(inputs) != len(names):
            raise SimulationError(f"{len(inputs)} inputs given, the model has {len(names)}")
        ordered = list(inputs)
    for index, array in zip(parsed.inputs, ordered, strict=True):
        values.put(index, array)
    result = VelaRunResult(outputs=[])
    fast: dict[int, RegionImage] = {}
    for op in parsed.operators:
        if op.kind != "ethos-u":
            if host is None:
                raise SimulationError(
                    f"operator {op.index} ({op.kind}) runs on the host; no host runner given"
                )
            outputs = host(parsed, op, [values.get(i)[0] for i in op.inputs if i >= 0])
            for index, array in zip(op.outputs, outputs, strict=True):
                values.put(index, array)
            continue
        stream, regions = _regions(parsed, op, values, fast)
        if command_streams is not None and op.index in command_streams:
            stream = command_streams[op.index]
        run = simulate(stream, regions, accelerator, strict=strict, copy=False)
        result.runs.append(run)
        result.ethos_u_ops += 1
        result.npu_ops += run.npu_ops
        result.dma_ops += run.dma_ops
        result.dma_unwritten_bytes += run.dma_unwritten_bytes
        label = f"ethos-u#{op.index}"
        result.findings.extend(replace(f, command=f"{label} {f.command}") for f in run.findings)
    for index in parsed.outputs:
        array, complete = values.get(index)
        if not complete:
            result.findings.append(
                Finding(
                    FindingKind.UNINITIALISED_READ,
                    -1,
                    f"output {parsed.tensors[index].name}",
                    "bytes of the output that no command wrote",
                )
            )
        result.outputs.append(array)
    result.seconds = time.perf_counter() - started
    return result
