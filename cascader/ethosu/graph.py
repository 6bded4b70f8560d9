"""Legalized NPU functions -> CascaderGraph, and the memory setup (regions, homes, options)
that turns the graph into one cascader run for an Ethos-U system.

One EthosuPart per NPU op (block configs from the device model), an InlinePart per reshape
left between NPU ops and per concatenation input written in place; tensors for every feature
map, weight and scale-bias array. Parts are in reverse topological order and tensors follow
them: part outputs, then graph inputs, then constants, as the original cascader ordered them.
"""

from __future__ import annotations

from dataclasses import replace

from ethosu.vela.architecture_features import ArchitectureFeatures

from cascader.core.graph import CascaderGraph
from cascader.core.graph_json import GraphDocument
from cascader.core.options import CascaderOptions
from cascader.core.part import InlinePart, Part
from cascader.core.tensor import Tensor
from cascader.ethosu.defaults import DEFAULT_ACCELERATOR, POINT_OPTIONS
from cascader.ethosu.device import EthosuDevice, get_device
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.part import EthosuPart
from cascader.ethosu.propagation import op_propagation, subkernels
from cascader.ethosu.weights import encoded_weights
from cascader.ir.layout import stored_shape
from cascader.ir.npu_ops import (
    Activation,
    BinaryElementwise,
    Concatenation,
    Conv2D,
    Identity,
    NpuFunction,
    NpuOp,
    NpuTensor,
    Pooling,
    UnaryElementwise,
    feature_inputs,
    feature_map,
    with_inputs,
)
from cascader.ir.units import SCALE_BIAS_BYTES

_LUT_FUNCTIONS = {"sigmoid": "SIGMOID", "tanh": "TANH"}
_POOL_TYPES = {"MAX": "MAX", "AVG": "AVERAGE", "SUM": "REDUCE_SUM"}
# The IR's IFM upscale modes by Vela's names (NpuResamplingMode): the upscale shrinks the IFM
# block an OFM block reads, which decides the blocks that fit the shared buffer.
_RESAMPLING = {"NONE": "NONE", "NEAREST": "NEAREST", "ZEROS": "TRANSPOSE"}


def _activation(activation: Activation) -> str:
    if activation.kind == "CLAMP":
        return "CLIP"
    if activation.kind == "LUT":
        return _LUT_FUNCTIONS.get(activation.function, "LUT")
    return "NONE"


def _hwc(tensor: NpuTensor) -> tuple[int, int, int]:
    """(height, width, depth) of a feature map; lower-rank shapes fill from the right."""
    shape = (1, 1, 1, *tensor.shape)[-4:]
    return shape[1], shape[2], shape[3]


def npu_op_description(op: NpuOp) -> NpuOpDescription:
    """What the device model needs to know about an op to list its block configs. Table
    lookups and requantizing copies run on the NPU as 1x1 average pools, as Vela runs them."""
    ifm = feature_inputs(op)[0]
    common = {
        "ifm_shape": _hwc(ifm),
        "ofm_shape": _hwc(op.ofm),
        "ifm_dtype": ifm.dtype,
        "ofm_dtype": op.ofm.dtype,
        "ifm_layout": ifm.layout.value,
        "ofm_layout": op.ofm.layout.value,
    }
    if isinstance(op, Conv2D):
        k = op.kernel
        return NpuOpDescription(
            kind="depthwise" if op.kind == "depthwise_conv2d" else "conv2d",
            kernel=(k.height, k.width),
            stride=(k.stride_h, k.stride_w),
            dilation=(k.dilation_h, k.dilation_w),
            activation=_activation(op.activation),
            upscale=_RESAMPLING[op.upscale],
            **common,
        )
    if isinstance(op, Pooling):
        k = op.kernel
        return NpuOpDescription(
            kind="pooling",
            sub_op=_POOL_TYPES[op.pool_type],
            kernel=(k.height, k.width),
            stride=(k.stride_h, k.stride_w),
            activation=_activation(op.activation),
            upscale=_RESAMPLING[op.upscale],
            **common,
        )
    if isinstance(op, BinaryElementwise):
        return NpuOpDescription(
            kind="elementwise",
            sub_op=op.operator,
            ifm2_shape=_hwc(op.ifm2),
            ifm2_scalar=op.ifm2_scalar is not None,
            activation=_activation(op.activation),
            **common,
        )
    if isinstance(op, UnaryElementwise) and op.operator != "LUT":
        return NpuOpDescription(kind="elementwise", sub_op=op.operator, **common)
    if isinstance(op, Concatenation):  # its copies, costed as one of the whole OFM
        common.update(ifm_shape=common["ofm_shape"], ifm_dtype=op.ofm.dtype,
                      ifm_layout=op.ofm.layout.value)  # fmt: skip
    activation = _activation(op.activation) if isinstance(op, UnaryElementwise) else "NONE"
    return NpuOpDescription(kind="pooling", sub_op="AVERAGE", activation=activation, **common)


def _in_place_slots(op: NpuOp) -> tuple[int, ...]:
    """The feature-map inputs of an elementwise op with the output's shape, type and layout
    (Vela's condition for writing the output over one); whether an input is read by this op
    alone is the graph's to say (`core.part.in_place_input`)."""
    elementwise = isinstance(op, BinaryElementwise) or (
        isinstance(op, UnaryElementwise) and op.operator != "LUT"  # a LUT runs as a pooling
    )
    if not elementwise:
        return ()
    return tuple(
        slot
        for slot, (tensor, scalar) in enumerate(zip(_op_inputs(op), _scalars(op), strict=True))
        if scalar is None
        and (tensor.shape, tensor.dtype, tensor.layout)
        == (op.ofm.shape, op.ofm.dtype, op.ofm.layout)
    )


def _is_inline(op: NpuOp) -> bool:
    """Reshapes and copies of what is already in place run no NPU op."""
    return isinstance(op, Identity) and op.operator in ("RESHAPE", "IN_PLACE")


def _scalars(op: NpuOp) -> tuple[int | None, ...]:
    """Per feature-map input, its constant scalar value (a binary op's scalar operand)."""
    if isinstance(op, BinaryElementwise):
        return (op.ifm_scalar, op.ifm2_scalar)
    return (None,) * len(feature_inputs(op))


def _op_inputs(op: NpuOp) -> list[NpuTensor]:
    return list(feature_inputs(op))


Key = tuple[int, int, str]  # (function, producing op index or -1 for an input, name)


def dataflow(functions: list[NpuFunction]) -> list[tuple[NpuOp, Key, list[Key]]]:
    """Every op, in topological order, with the key of its output and of each input feature
    map. Names may repeat within a function (relax reuses name hints), so an input is the
    latest earlier definition of its name, as in SSA form, or the function's input. An input
    read through an elided reshape takes its producer's shape and layout: the part reads the
    producer's buffer."""
    nodes = []
    for f_index, function in enumerate(functions):
        latest: dict[str, tuple[int, NpuTensor]] = {}
        for op_index, op in enumerate(function.ops):
            inputs: list[Key] = []
            read: list[NpuTensor] = []
            for slot, (tensor, scalar) in enumerate(zip(_op_inputs(op), _scalars(op), strict=True)):
                producer, produced = latest.get(tensor.name, (-1, feature_map(tensor)))
                inputs.append((f_index, op_index, f"scalar{slot}") if scalar is not None
                              else (f_index, producer, tensor.name))  # fmt: skip
                read.append(produced)
            op = with_inputs(replace(op, ofm=feature_map(op.ofm)), tuple(read))
            nodes.append((op, (f_index, op_index, op.ofm.name), inputs))
            latest[op.ofm.name] = (op_index, op.ofm)
    return nodes


def _output_keys(functions: list[NpuFunction]) -> list[Key]:
    keys = []
    for f_index, function in enumerate(functions):
        for name in function.outputs:
            producers = [i for i, op in enumerate(function.ops) if op.ofm.name == name]
            if producers:
                keys.append((f_index, producers[-1], name))
    return keys


def build_cascader_graph(
    functions: list[NpuFunction], accelerator: str = DEFAULT_ACCELERATOR, cull_blocks: bool = True
) -> CascaderGraph:
    """The CascaderGraph of the NPU functions of one model on `accelerator`. Function outputs
    are graph outputs; function inputs and constants are graph inputs (host ops sit between
    functions). `cull_blocks` drops block configs another valid one covers from what the
    "tvm" cost model chooses among; the "vela" one chooses among all, as Vela does, and
    counts weights as encoded (`weight_encoding`; the "tvm" one, as the original, counts
    their elements: the tensors keep compression ratio 1)."""
    device = get_device(accelerator)
    tensors: dict[object, Tensor] = {}

    def tensor(key: object, shape: tuple[int, ...], dtype: str, constant: bool) -> Tensor:
        if key not in tensors:
            tensors[key] = Tensor(-1, shape, dtype, constant, 1.0)
        return tensors[key]

    spec: list[tuple[NpuOp, Tensor, list[Tensor], tuple[float, int]]] = []
    for op, out_key, in_keys in reversed(dataflow(functions)):
        output = tensor(out_key, stored_shape(op.ofm), op.ofm.dtype, False)
        inputs = [
            tensor(key, stored_shape(t), t.dtype, scalar is not None)
            for key, t, scalar in zip(in_keys, _op_inputs(op), _scalars(op), strict=True)
        ]
        encoding = (1.0, 0)
        if isinstance(op, Conv2D):
            encoding = weight_encoding(op, accelerator)
            inputs.append(tensor(("weights", out_key), op.weights.shape, "int8", True))
            bias_shape = (op.ofm.shape[-1], SCALE_BIAS_BYTES)
            inputs.append(tensor(("scale_bias", out_key), bias_shape, "uint8", True))
        spec.append((op, output, inputs, encoding))
    part_outputs = [output for _, output, _, _ in spec]
    produced = {id(output) for output in part_outputs}
    ordered = _order_tensors(part_outputs, list(tensors.values()))
    parts = [
        _part(i, op, output, inputs, device, cull_blocks, encoding)
        for i, (op, output, inputs, encoding) in enumerate(spec)
    ]
    graph_inputs = [t for t in ordered if id(t) not in produced]
    outputs = [tensors[key] for key in _output_keys(functions)]
    return CascaderGraph(ordered, parts, graph_inputs, outputs)


def weight_encoding(op: Conv2D, accelerator: str) -> tuple[float, int]:
    """(encoded bytes per weight byte, bytes every encoded stream adds) of a convolution's
    weights as the schedule copies and the NPU reads them, a depth slice of c channels
    taking ratio * its bytes + the stream bytes: fitted to Vela's encoding (16-deep OFM
    blocks, the OFM split depth) of all the channels and of the first 16. The ratio runs up
    to about 1.4 for small kernels and well below 1 for sparse weights; a stream's header
    and padding are what make thin slices dearer per weight."""

    split = ArchitectureFeatures.OFMSplitDepth
    depth = op.ofm.shape[3]
    whole = len(encoded_weights(accelerator, op, 0, depth, split))
    per_channel = op.weights.size // depth
    if depth <= split:
        return whole / op.weights.size, 0
    first = len(encoded_weights(accelerator, op, 0, split, split))
    ratio = (whole - first) / ((depth - split) * per_channel)
    stream = first - ratio * split * per_channel
    if ratio <= 0 or stream < 0:
        return whole / op.weights.size, 0
    return ratio, round(stream)


def _order_tensors(part_outputs: list[Tensor], tensors: list[Tensor]) -> list[Tensor]:
    """Part outputs (in part order), then graph inputs, then constants; ids = positions."""
    produced = {id(t) for t in part_outputs}
    inputs = [t for t in tensors if id(t) not in produced and not t.is_constant]
    constants = [t for t in tensors if t.is_constant]
    ordered = part_outputs + inputs + constants
    for position, tensor in enumerate(ordered):
        tensor.id = position
    return ordered


def _part(
    index: int,
    op: NpuOp,
    output: Tensor,
    inputs: list[Tensor],
    device: EthosuDevice,
    cull: bool,
    encoding: tuple[float, int],
) -> Part:
    quantum = device.output_quantum(op.ofm.layout.value)
    propagation = op_propagation(op, quantum)
    if _is_inline(op):
        return InlinePart(
            index, inputs, output, list(propagation.propagators), propagation.stripe_align_hint
        )
    description = npu_op_description(op)
    return EthosuPart(
        index,
        inputs,
        output,
        list(propagation.propagators),
        output_quantum=quantum,
        subkernels=subkernels(op),
        block_configs=list(device.block_configs(description, cull=cull)),
        weight_tensor_idx=1 if isinstance(op, Conv2D) else -1,
        stripe_align_hint=propagation.stripe_align_hint,
        op=type(op).__name__.lower() if not isinstance(op, Conv2D) else op.kind,
        vela_block_configs=list(device.block_configs(description, cull=False)),
        weight_compression=encoding[0],
        weight_stream_bytes=encoding[1],
        in_place_slots=_in_place_slots(op),
        # A pad fills its whole output before its first stripe (`codegen.block_copy`).
        rows_outermost=getattr(op, "ofm_fill", None) is None,
    )


def home_map(graph: CascaderGraph, memory: SystemMemory) -> dict[int, list[str]]:
    """Where each tensor may live: constants in the constants area (flash or DRAM), graph
    inputs and outputs in the I/O area (Vela's arena), the rest in the cascade region and,
    when the memory mode puts the arena elsewhere (Dedicated_Sram), also there."""
    constants = memory.constants_area
    io = memory.io_area
    working = list(dict.fromkeys([memory.cascade_area, io]))
    boundary = {t.id for t in graph.output_tensors} | {
        t.id for t in graph.input_tensors if not t.is_constant
    }
    return {
        t.id: [constants] if t.is_constant else [io] if t.id in boundary else working
        for t in graph.tensors
    }


def graph_document(
    graph: CascaderGraph, memory: SystemMemory, options: CascaderOptions | None = None
) -> GraphDocument:
    """The graph with everything one cascader run needs: the system's regions (the cascade
    region sized to the SRAM pool), the tensor homes and the options (striping on unless
    given, the cascade region set to the system's SRAM)."""
    options = replace(
        options or POINT_OPTIONS,
        cascade_region=memory.cascade_area,
    )
    return GraphDocument(
        graph=graph,
        regions=dict(memory.regions),
        home_map=home_map(graph, memory),
        options=options,
        extras={
            "source": f"cascader-dse graph of {memory.accelerator}, {memory.system_config}, "
            f"{memory.memory_mode}",
            "accelerator": memory.accelerator,
            "pool_bytes": memory.sram_bytes,
        },
    )
