"""Serialise a resolved int8 graph to a TFLite flatbuffer with the `tflite` schema builders.

This module knows the file format only: operator codes and versions, builtin options tables,
tensors, buffers and quantisation tables. Choosing values is the model builder's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
import tflite

_SCHEMA_VERSION = 3
_FILE_IDENTIFIER = b"TFL3"
_BUFFER_ALIGNMENT = 16
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127

_TENSOR_TYPES = {"int8": tflite.TensorType.INT8, "int32": tflite.TensorType.INT32}
_PADDINGS = {"SAME": tflite.Padding.SAME, "VALID": tflite.Padding.VALID}


@dataclass(frozen=True)
class TensorDef:
    """A tensor as stored in the file; `data` set for constants, scales for quantised ones."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    data: bytes | None = None
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    quantized_dimension: int = 0


@dataclass(frozen=True)
class OperatorDef:
    """One builtin operator; `inputs` may hold -1 for an omitted optional input."""

    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


def _activation(options: Mapping[str, Any]) -> int:
    return getattr(tflite.ActivationFunctionType, options.get("activation", "NONE"))


def _conv2d(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.Conv2DOptionsStart(b)
    tflite.Conv2DOptionsAddPadding(b, _PADDINGS[o["padding"]])
    tflite.Conv2DOptionsAddStrideH(b, o["stride"][0])
    tflite.Conv2DOptionsAddStrideW(b, o["stride"][1])
    tflite.Conv2DOptionsAddDilationHFactor(b, o["dilation"][0])
    tflite.Conv2DOptionsAddDilationWFactor(b, o["dilation"][1])
    tflite.Conv2DOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.Conv2DOptionsEnd(b)


def _depthwise(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.DepthwiseConv2DOptionsStart(b)
    tflite.DepthwiseConv2DOptionsAddPadding(b, _PADDINGS[o["padding"]])
    tflite.DepthwiseConv2DOptionsAddStrideH(b, o["stride"][0])
    tflite.DepthwiseConv2DOptionsAddStrideW(b, o["stride"][1])
    tflite.DepthwiseConv2DOptionsAddDilationHFactor(b, o["dilation"][0])
    tflite.DepthwiseConv2DOptionsAddDilationWFactor(b, o["dilation"][1])
    tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, o["depth_multiplier"])
    tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.DepthwiseConv2DOptionsEnd(b)


def _transpose_conv(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.TransposeConvOptionsStart(b)
    tflite.TransposeConvOptionsAddPadding(b, _PADDINGS[o["padding"]])
    tflite.TransposeConvOptionsAddStrideH(b, o["stride"][0])
    tflite.TransposeConvOptionsAddStrideW(b, o["stride"][1])
    return tflite.TransposeConvOptionsEnd(b)


def _fully_connected(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.FullyConnectedOptionsStart(b)
    tflite.FullyConnectedOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.FullyConnectedOptionsEnd(b)


def _pool2d(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.Pool2DOptionsStart(b)
    tflite.Pool2DOptionsAddPadding(b, _PADDINGS[o["padding"]])
    tflite.Pool2DOptionsAddStrideH(b, o["stride"][0])
    tflite.Pool2DOptionsAddStrideW(b, o["stride"][1])
    tflite.Pool2DOptionsAddFilterHeight(b, o["pool"][0])
    tflite.Pool2DOptionsAddFilterWidth(b, o["pool"][1])
    tflite.Pool2DOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.Pool2DOptionsEnd(b)


def _add(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.AddOptionsStart(b)
    tflite.AddOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.AddOptionsEnd(b)


def _sub(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.SubOptionsStart(b)
    tflite.SubOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.SubOptionsEnd(b)


def _mul(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.MulOptionsStart(b)
    tflite.MulOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.MulOptionsEnd(b)


def _maximum_minimum(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.MaximumMinimumOptionsStart(b)
    return tflite.MaximumMinimumOptionsEnd(b)


def _reshape(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    new_shape = b.CreateNumpyVector(np.asarray(o["new_shape"], np.int32))
    tflite.ReshapeOptionsStart(b)
    tflite.ReshapeOptionsAddNewShape(b, new_shape)
    return tflite.ReshapeOptionsEnd(b)


def _concatenation(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.ConcatenationOptionsStart(b)
    tflite.ConcatenationOptionsAddAxis(b, o["axis"])
    tflite.ConcatenationOptionsAddFusedActivationFunction(b, _activation(o))
    return tflite.ConcatenationOptionsEnd(b)


def _pad(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.PadOptionsStart(b)
    return tflite.PadOptionsEnd(b)


def _reducer(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.ReducerOptionsStart(b)
    tflite.ReducerOptionsAddKeepDims(b, o["keep_dims"])
    return tflite.ReducerOptionsEnd(b)


def _resize_nearest(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.ResizeNearestNeighborOptionsStart(b)
    tflite.ResizeNearestNeighborOptionsAddAlignCorners(b, o["align_corners"])
    tflite.ResizeNearestNeighborOptionsAddHalfPixelCenters(b, o["half_pixel_centers"])
    return tflite.ResizeNearestNeighborOptionsEnd(b)


def _resize_bilinear(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.ResizeBilinearOptionsStart(b)
    tflite.ResizeBilinearOptionsAddAlignCorners(b, o["align_corners"])
    tflite.ResizeBilinearOptionsAddHalfPixelCenters(b, o["half_pixel_centers"])
    return tflite.ResizeBilinearOptionsEnd(b)


def _strided_slice(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.StridedSliceOptionsStart(b)
    return tflite.StridedSliceOptionsEnd(b)


def _split(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.SplitOptionsStart(b)
    tflite.SplitOptionsAddNumSplits(b, o["num_splits"])
    return tflite.SplitOptionsEnd(b)


def _hard_swish(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.HardSwishOptionsStart(b)
    return tflite.HardSwishOptionsEnd(b)


def _leaky_relu(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.LeakyReluOptionsStart(b)
    tflite.LeakyReluOptionsAddAlpha(b, o["alpha"])
    return tflite.LeakyReluOptionsEnd(b)


def _softmax(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.SoftmaxOptionsStart(b)
    tflite.SoftmaxOptionsAddBeta(b, o["beta"])
    return tflite.SoftmaxOptionsEnd(b)


def _quantize(b: flatbuffers.Builder, o: Mapping[str, Any]) -> int:
    tflite.QuantizeOptionsStart(b)
    return tflite.QuantizeOptionsEnd(b)


OptionsWriter = Callable[[flatbuffers.Builder, Mapping[str, Any]], int]


@dataclass(frozen=True)
class _OpSchema:
    version: int
    options_type: int
    write_options: OptionsWriter | None


_BO = tflite.BuiltinOptions
# Versions are those the TFLite converter writes for int8 (per-channel) variants of each op.
_OPS: dict[str, _OpSchema] = {
    "CONV_2D": _OpSchema(3, _BO.Conv2DOptions, _conv2d),
    "DEPTHWISE_CONV_2D": _OpSchema(3, _BO.DepthwiseConv2DOptions, _depthwise),
    "TRANSPOSE_CONV": _OpSchema(3, _BO.TransposeConvOptions, _transpose_conv),
    "FULLY_CONNECTED": _OpSchema(4, _BO.FullyConnectedOptions, _fully_connected),
    "MAX_POOL_2D": _OpSchema(2, _BO.Pool2DOptions, _pool2d),
    "AVERAGE_POOL_2D": _OpSchema(2, _BO.Pool2DOptions, _pool2d),
    "ADD": _OpSchema(2, _BO.AddOptions, _add),
    "SUB": _OpSchema(2, _BO.SubOptions, _sub),
    "MUL": _OpSchema(2, _BO.MulOptions, _mul),
    "MINIMUM": _OpSchema(2, _BO.MaximumMinimumOptions, _maximum_minimum),
    "MAXIMUM": _OpSchema(2, _BO.MaximumMinimumOptions, _maximum_minimum),
    "RESHAPE": _OpSchema(1, _BO.ReshapeOptions, _reshape),
    "CONCATENATION": _OpSchema(2, _BO.ConcatenationOptions, _concatenation),
    "PAD": _OpSchema(2, _BO.PadOptions, _pad),
    "MEAN": _OpSchema(2, _BO.ReducerOptions, _reducer),
    "RESIZE_NEAREST_NEIGHBOR": _OpSchema(2, _BO.ResizeNearestNeighborOptions, _resize_nearest),
    "RESIZE_BILINEAR": _OpSchema(2, _BO.ResizeBilinearOptions, _resize_bilinear),
    "STRIDED_SLICE": _OpSchema(2, _BO.StridedSliceOptions, _strided_slice),
    "SPLIT": _OpSchema(2, _BO.SplitOptions, _split),
    "LOGISTIC": _OpSchema(2, _BO.NONE, None),
    "TANH": _OpSchema(2, _BO.NONE, None),
    "HARD_SWISH": _OpSchema(1, _BO.HardSwishOptions, _hard_swish),
    "LEAKY_RELU": _OpSchema(2, _BO.LeakyReluOptions, _leaky_relu),
    "SOFTMAX": _OpSchema(2, _BO.SoftmaxOptions, _softmax),
    "QUANTIZE": _OpSchema(2, _BO.QuantizeOptions, _quantize),
}

SUPPORTED_OPS: tuple[str, ...] = tuple(_OPS)


def _op_version(op: OperatorDef) -> int:
    # Half-pixel-centre resizing was added to the int8 resize kernels in version 3.
    if op.kind.startswith("RESIZE_") and op.options.get("half_pixel_centers"):
        return 3
    return _OPS[op.kind].version


def _int_vector(b: flatbuffers.Builder, values: Sequence[int]) -> int:
    return b.CreateNumpyVector(np.asarray(values, np.int32))


def _offset_vector(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _buffer(b: flatbuffers.Builder, data: bytes | None) -> int:
    payload = 0
    if data:
        b.StartVector(1, len(data), _BUFFER_ALIGNMENT)
        b.head = b.head - len(data)
        b.Bytes[b.head : b.head + len(data)] = data
        payload = b.EndVector()
    tflite.BufferStart(b)
    if data:
        tflite.BufferAddData(b, payload)
    return tflite.BufferEnd(b)


def _quantization(b: flatbuffers.Builder, t: TensorDef) -> int:
    scale = b.CreateNumpyVector(np.asarray(t.scales, np.float32))
    zero_point = b.CreateNumpyVector(np.asarray(t.zero_points, np.int64))
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, scale)
    tflite.QuantizationParametersAddZeroPoint(b, zero_point)
    tflite.QuantizationParametersAddQuantizedDimension(b, t.quantized_dimension)
    return tflite.QuantizationParametersEnd(b)


def _tensor(b: flatbuffers.Builder, t: TensorDef, buffer_index: int) -> int:
    name = b.CreateString(t.name)
    shape = _int_vector(b, t.shape)
    quant = _quantization(b, t) if t.scales else None
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, _TENSOR_TYPES[t.dtype])
    tflite.TensorAddBuffer(b, buffer_index)
    tflite.TensorAddName(b, name)
    if quant is not None:
        tflite.TensorAddQuantization(b, quant)
    return tflite.TensorEnd(b)


def _operator_code(b: flatbuffers.Builder, kind: str, version: int) -> int:
    code = getattr(tflite.BuiltinOperator, kind)
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, _PLACEHOLDER_FOR_GREATER_OP_CODES))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, version)
    return tflite.OperatorCodeEnd(b)


def _operator(b: flatbuffers.Builder, op: OperatorDef, opcode_index: int) -> int:
    schema = _OPS[op.kind]
    inputs = _int_vector(b, op.inputs)
    outputs = _int_vector(b, op.outputs)
    options = schema.write_options(b, op.options) if schema.write_options else None
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, opcode_index)
    tflite.OperatorAddInputs(b, inputs)
    tflite.OperatorAddOutputs(b, outputs)
    if options is not None:
        tflite.OperatorAddBuiltinOptionsType(b, schema.options_type)
        tflite.OperatorAddBuiltinOptions(b, options)
    return tflite.OperatorEnd(b)


def write_model(
    tensors: Sequence[TensorDef],
    operators: Sequence[OperatorDef],
    inputs: Sequence[int],
    outputs: Sequence[int],
    description: str,
    subgraph_name: str = "main",
) -> bytes:
    """One-subgraph TFLite model; buffer 0 is the empty buffer shared by all activations."""
    b = flatbuffers.Builder(1 << 16)
    codes: dict[tuple[str, int], int] = {}
    for op in operators:
        codes.setdefault((op.kind, _op_version(op)), len(codes))

    buffer_data: list[bytes | None] = [None]
    buffer_of: list[int] = []
    for t in tensors:
        if t.data is None:
            buffer_of.append(0)
        else:
            buffer_of.append(len(buffer_data))
            buffer_data.append(t.data)

    tensor_offsets = [_tensor(b, t, buffer_of[i]) for i, t in enumerate(tensors)]
    op_offsets = [_operator(b, op, codes[(op.kind, _op_version(op))]) for op in operators]
    sg_name = b.CreateString(subgraph_name)
    sg_tensors = _offset_vector(b, tensor_offsets)
    sg_inputs = _int_vector(b, inputs)
    sg_outputs = _int_vector(b, outputs)
    sg_ops = _offset_vector(b, op_offsets)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, sg_tensors)
    tflite.SubGraphAddInputs(b, sg_inputs)
    tflite.SubGraphAddOutputs(b, sg_outputs)
    tflite.SubGraphAddOperators(b, sg_ops)
    tflite.SubGraphAddName(b, sg_name)
    subgraph = tflite.SubGraphEnd(b)

    code_offsets = [_operator_code(b, kind, version) for kind, version in codes]
    buffer_offsets = [_buffer(b, data) for data in buffer_data]
    desc = b.CreateString(description)
    model_codes = _offset_vector(b, code_offsets)
    model_subgraphs = _offset_vector(b, [subgraph])
    model_buffers = _offset_vector(b, buffer_offsets)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, _SCHEMA_VERSION)
    tflite.ModelAddOperatorCodes(b, model_codes)
    tflite.ModelAddSubgraphs(b, model_subgraphs)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, model_buffers)
    model = tflite.ModelEnd(b)
    b.Finish(model, file_identifier=_FILE_IDENTIFIER)
    return bytes(b.Output())
