"""The shipped artifact: the input model with each NPU function replaced by one `ethos-u`
custom operator, laid out as Vela 5.2 writes `m_vela.tflite` (its default core), so TensorFlow
Lite Micro's Ethos-U kernel and Arm's core driver run it as they run Vela's file.

Each custom operator reads, in order: its command stream (the driver payload, a uint8 tensor
of its own), the read-only constants (one uint8 tensor all operators share: base pointer 0),
the scratch arena (base pointer 1, no data: TFLite Micro allocates it), the fast scratch
(base pointer 2: the scratch tensor again when the arena is the fast memory), then its IFMs;
it writes its OFMs. Custom options are Vela's ([1, 4, 1]: a flexbuffer uint8 1, "NPU op").
The `OfflineMemoryAllocation` metadata places the scratch tensors at offset 0 of the arena
and every IFM and OFM of an NPU operator at the address the command stream reads it from, so
host operators around them (kept as TFLite builtins) find them there. Tensors are numbered
in order of first use by the operators, buffers likewise (buffer 0 the empty one), then the
model's own metadata and the allocation; signature definitions follow the renumbering. Every
buffer's data starts at a multiple of 16 bytes in the file, as the TFLite schema asks
(`force_align: 16`) and as Arm's driver requires of the command stream and of every base
address it is given (`cascader.simulator.driver` applies those checks)."""

from __future__ import annotations

from collections.abc import Sequence

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from cascader.ethosu.codegen import Compiled
from cascader.ir.npu_ops import Layout
from cascader.ir.schedule import REGION_ARENA, Schedule
from cascader.simulator.driver import driver_refusals
from cascader.verify.boundaries import NpuStep, TfliteGraph, npu_steps

CUSTOM_CODE = b"ethos-u"
CUSTOM_OPTIONS = [0x01, 0x04, 0x01]  # flexbuffer: uint8 1 (Vela's "NPU operation" marker)
OFFLINE_ALLOCATION = b"OfflineMemoryAllocation"
COMMAND_STREAM, READ_ONLY, SCRATCH, SCRATCH_FAST = (
    b"ethos_u_command_stream",
    b"read_only",
    b"scratch",
    b"scratch_fast",
)
_NOT_PLANNED = -1  # an offset TFLite Micro plans online
BUFFER_ALIGNMENT = 16


class PackageError(ValueError):
    """The model cannot be written in Vela's layout as scheduled."""


def _uint8_tensor(name: bytes, size: int, buffer: int) -> schema.TensorT:
    tensor = schema.TensorT()
    tensor.name, tensor.shape, tensor.type, tensor.buffer = (
        name,
        [size],
        schema.TensorType.UINT8,
        buffer,
    )
    return tensor


class _AlignedBuffer(schema.BufferT):
    """A buffer packed with its data at a multiple of `BUFFER_ALIGNMENT` bytes from the end of
    the flatbuffer, hence (the builder pads the finished file to its largest alignment) from
    its start: the object API aligns byte vectors only to 4."""

    def Pack(self, builder: flatbuffers.Builder) -> int:
        if self.data is None:
            return super().Pack(builder)
        payload = np.asarray(self.data, np.uint8).tobytes()
        builder.StartVector(1, len(payload), BUFFER_ALIGNMENT)
        builder.head -= len(payload)
        builder.Bytes[builder.head : builder.head + len(payload)] = payload
        data = builder.EndVector()
        schema.BufferStart(builder)
        schema.BufferAddData(builder, data)
        schema.BufferAddOffset(builder, self.offset)
        schema.BufferAddSize(builder, self.size)
        return schema.BufferEnd(builder)


def _buffer(data: bytes | np.ndarray | None) -> _AlignedBuffer:
    buffer = _AlignedBuffer()
    buffer.data = None if data is None else np.frombuffer(data, np.uint8)
    return buffer


def io_addresses(schedule: Schedule) -> list[dict[str, int]]:
    """Per NPU function, the arena address of each of its inputs and outputs, by name (names
    are unique within a function, not across functions)."""
    net = schedule.network
    graph = net.graph
    found: list[dict[str, int]] = [{} for _ in net.functions]
    for tensor in [*graph.input_tensors, *graph.output_tensors]:
        root = net.buffer_root(tensor.id)
        if tensor.is_constant or root not in schedule.tensor_buffer:
            continue
        buffer = schedule.buffers[schedule.tensor_buffer[root]]
        fm = net.feature_map(tensor.id)
        if buffer.region != REGION_ARENA or buffer.layout != Layout.NHWC:
            raise PackageError(
                f"{fm.name} is in region {buffer.region} as {buffer.layout.value}; the host "
                "reads NPU inputs and outputs as NHWC in the arena"
            )
        for part in [*tensor.consumers, *tensor.producers]:
            found[net.function_of[part.id]][fm.name] = buffer.address
    return found


def _ordered(
    operators: list[schema.OperatorT], inputs: Sequence[int], outputs: Sequence[int]
) -> list[int]:
    """Tensor ids in order of first use by the operators (inputs, then outputs, operator by
    operator), then graph inputs and outputs no operator uses."""
    seen: dict[int, None] = {}
    for op in operators:
        for tid in [*op.inputs, *op.outputs]:
            if tid >= 0:
                seen.setdefault(int(tid), None)
    for tid in [*inputs, *outputs]:
        seen.setdefault(int(tid), None)
    return list(seen)


def model_for_firmware(model: bytes, compiled: Compiled, schedule: Schedule) -> bytes:
    """The model with its NPU functions (the schedule's network's) replaced by their
    `ethos-u` operators: `vela_tflite` with the TFLite tensors and operators each function
    stands for found in the model (`cascader.verify.boundaries`)."""
    graph = TfliteGraph(schema.ModelT.InitFromPackedBuf(model, 0))
    steps = npu_steps(model, graph, schedule.network.functions)
    return vela_tflite(model, steps, compiled, schedule)


def vela_tflite(
    model: bytes, steps: Sequence[NpuStep], compiled: Compiled, schedule: Schedule
) -> bytes:
    """The model with every NPU function of `steps` (which TFLite tensors and operators each
    stands for) replaced by its `ethos-u` operator from `compiled` and `schedule`. Raises
    PackageError for a file Arm's driver would refuse (`driver_refusals`)."""
    tree = schema.ModelT.InitFromPackedBuf(model, 0)
    if len(tree.subgraphs) != 1:
        raise PackageError(f"the model has {len(tree.subgraphs)} subgraphs; one is supported")
    sub = tree.subgraphs[0]
    streams = {stream.name: stream for stream in compiled.functions}
    addresses = io_addresses(schedule)
    function_index = {f.name: i for i, f in enumerate(schedule.network.functions)}
    memory = schedule.memory
    tensors = list(sub.tensors)
    buffers = list(tree.buffers)

    def add(tensor: schema.TensorT, data: bytes | None) -> int:
        if data is not None:
            buffers.append(_buffer(data))
            tensor.buffer = len(buffers) - 1
        tensors.append(tensor)
        return len(tensors) - 1

    read_only = add(_uint8_tensor(READ_ONLY, len(compiled.constants), 0), compiled.constants)
    scratch = add(_uint8_tensor(SCRATCH, max(schedule.arena_bytes, 1), 0), None)
    fast = scratch
    if memory.cascade_area != memory.io_area:
        fast = add(_uint8_tensor(SCRATCH_FAST, max(schedule.scratch_bytes, 1), 0), None)
    codes = list(tree.operatorCodes)
    custom = schema.OperatorCodeT()
    custom.builtinCode = custom.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
    custom.customCode, custom.version = CUSTOM_CODE, 1
    codes.append(custom)

    placed: dict[int, int] = {}  # tensor -> arena offset
    replaced: dict[int, schema.OperatorT] = {}  # first covered operator -> its ethos-u op
    covered: set[int] = set()
    for step in steps:
        stream = streams.get(step.function.name)
        if stream is None:
            raise PackageError(f"no command stream was compiled for {step.function.name}")
        payload = stream.driver_payload
        command = add(_uint8_tensor(COMMAND_STREAM, len(payload), 0), payload)
        op = schema.OperatorT()
        op.opcodeIndex = len(codes) - 1
        op.inputs = [command, read_only, scratch, fast, *step.inputs]
        op.outputs = list(step.outputs)
        op.customOptions = list(CUSTOM_OPTIONS)
        op.customOptionsFormat = schema.CustomOptionsFormat.FLEXBUFFERS
        names = [*step.function.inputs, *step.function.outputs]
        own = addresses[function_index[step.function.name]]
        for tid, name in zip([*step.inputs, *step.outputs], names, strict=True):
            if name not in own:
                raise PackageError(f"{step.function.name}: {name} has no arena address")
            placed[tid] = own[name]
        replaced[min(step.operators)] = op
        covered |= step.operators
    operators = _in_order(sub, replaced, covered)
    order = _ordered(operators, sub.inputs, sub.outputs)
    new_id = {old: new for new, old in enumerate(order)}
    data_buffers = [0]  # old buffer ids in their new order; 0 stays the empty buffer
    kept_tensors = []
    for old in order:
        tensor = tensors[old]
        data = buffers[tensor.buffer].data if tensor.buffer < len(buffers) else None
        if tensor.buffer and data is not None and len(data):
            data_buffers.append(tensor.buffer)
            tensor.buffer = len(data_buffers) - 1
        else:
            tensor.buffer = 0
        kept_tensors.append(tensor)
    for op in operators:
        op.inputs = [new_id[int(t)] if t >= 0 else -1 for t in op.inputs]
        op.outputs = [new_id[int(t)] for t in op.outputs]
    sub.tensors = kept_tensors
    sub.operators = operators
    sub.inputs = [new_id[int(t)] for t in sub.inputs]
    sub.outputs = [new_id[int(t)] for t in sub.outputs]
    new_buffers = [_buffer(None)] + [_buffer(buffers[b].data) for b in data_buffers[1:]]
    metadata = []
    for entry in tree.metadata or []:
        if entry.name == OFFLINE_ALLOCATION:
            continue
        new_buffers.append(_buffer(buffers[entry.buffer].data))
        entry.buffer = len(new_buffers) - 1
        metadata.append(entry)
    offsets = [_NOT_PLANNED] * len(kept_tensors)
    for tid in {scratch, fast} & new_id.keys():  # unused when no NPU function
        offsets[new_id[tid]] = 0
    for tid, address in placed.items():
        offsets[new_id[tid]] = address
    allocation = np.array([0, len(tree.subgraphs), len(offsets), *offsets], "<i4").tobytes()
    new_buffers.append(_buffer(allocation))
    entry = schema.MetadataT()
    entry.name, entry.buffer = OFFLINE_ALLOCATION, len(new_buffers) - 1
    metadata.append(entry)
    signatures = []
    for signature in tree.signatureDefs or []:
        maps = [*(signature.inputs or []), *(signature.outputs or [])]
        if all(m.tensorIndex in new_id for m in maps):  # else it names no tensor of the graph
            for tensor_map in maps:
                tensor_map.tensorIndex = new_id[tensor_map.tensorIndex]
            signatures.append(signature)
    tree.signatureDefs = signatures
    tree.buffers = new_buffers
    tree.metadata = metadata
    tree.operatorCodes = _used_codes(codes, operators)
    tree.description = b"cascader-dse Optimised"
    builder = flatbuffers.Builder(1024)
    builder.Finish(tree.Pack(builder), file_identifier=b"TFL3")
    data = bytes(builder.Output())
    refusals = driver_refusals(data)
    if refusals:
        raise PackageError(f"the Ethos-U driver would refuse it: {refusals[0]}")
    return data


def _in_order(
    sub: schema.SubGraphT, replaced: dict[int, schema.OperatorT], covered: set[int]
) -> list[schema.OperatorT]:
    """The operators in an order that runs: each once everything it reads is there, the
    earliest original operator first (an NPU operator stands where its first one stood)."""
    pending = [
        (index, replaced.get(index, op))
        for index, op in enumerate(sub.operators)
        if index in replaced or index not in covered
    ]
    produced = {int(t) for _, op in pending for t in op.outputs}
    available: set[int] = set()
    order = []
    while pending:
        for position, (_, op) in enumerate(pending):
            if all(t < 0 or t not in produced or t in available for t in op.inputs):
                order.append(op)
                available.update(int(t) for t in op.outputs)
                del pending[position]
                break
        else:
            raise PackageError("the NPU operators and host operators form a cycle")
    return order


def _used_codes(
    codes: list[schema.OperatorCodeT], operators: list[schema.OperatorT]
) -> list[schema.OperatorCodeT]:
    """The operator codes the operators use, in order of first use, and the operators'
    code indices renumbered to match."""
    first: dict[int, int] = {}
    for op in operators:
        first.setdefault(op.opcodeIndex, len(first))
    for op in operators:
        op.opcodeIndex = first[op.opcodeIndex]
    return [codes[old] for old in first]
