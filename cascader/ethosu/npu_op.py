"""NpuOpDescription: the hashable facts about an NPU operation that its block configs and cycle
costs depend on, convertible to and from Vela's public API operations (`ethosu.vela.api`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ethosu.vela.api import (
    NpuActivation,
    NpuActivationOp,
    NpuBlockOperation,
    NpuBlockTraversal,
    NpuConv2DOperation,
    NpuConvDepthWiseOperation,
    NpuDataType,
    NpuElementWiseOp,
    NpuElementWiseOperation,
    NpuFeatureMap,
    NpuKernel,
    NpuLayout,
    NpuPoolingOp,
    NpuPoolingOperation,
    NpuQuantization,
    NpuResamplingMode,
    NpuShape3D,
)
from ethosu.vela.architecture_allocator import _choose_kernel_method
from ethosu.vela.high_level_command_to_npu_op import elementwise_op_map
from ethosu.vela.operation import Kernel, NpuBlockType, Op
from ethosu.vela.shape4d import Shape4D

from cascader.memo import memo_function

OpKind = Literal["conv2d", "depthwise", "pooling", "elementwise"]
Activation = Literal["NONE", "CLIP", "TANH", "SIGMOID", "LUT"]
OP_KINDS: tuple[str, ...] = ("conv2d", "depthwise", "pooling", "elementwise")

_DTYPES = {"int8": NpuDataType.INT8, "uint8": NpuDataType.UINT8, "int16": NpuDataType.INT16,
           "uint16": NpuDataType.UINT16, "int32": NpuDataType.INT32}  # fmt: skip
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}
_ACTIVATIONS = {
    NpuActivationOp.TANH: "TANH",
    NpuActivationOp.SIGMOID: "SIGMOID",
    NpuActivationOp.TABLE_LOOKUP: "LUT",
}
# Vela's fused-activation op for each activation: it selects the activation cycles per element.
_FAF_OPS = {"NONE": None, "CLIP": Op.Relu, "TANH": Op.Tanh, "SIGMOID": Op.Sigmoid, "LUT": Op.LUT}
_POOL_OPS = {"MAX": Op.MaxPool, "AVERAGE": Op.AvgPool, "REDUCE_SUM": Op.ReduceSum}
_ELEMENTWISE_OPS = {npu_op.name: op for op, npu_op in elementwise_op_map.items()}
_SUB_OPS: dict[str, tuple[str, ...]] = {
    "conv2d": ("",),
    "depthwise": ("",),
    "pooling": tuple(_POOL_OPS),
    "elementwise": tuple(_ELEMENTWISE_OPS),
}


@dataclass(frozen=True)
class NpuOpDescription:
    """One NPU operation as the block-config search and the cycle model see it. Shapes are
    (height, width, depth); kernel, stride and dilation are (y, x). `sub_op` names Vela's
    NpuPoolingOp (MAX, AVERAGE, REDUCE_SUM) or NpuElementWiseOp (ADD, SUB, MUL, ...)."""

    kind: OpKind
    ifm_shape: tuple[int, int, int]
    ofm_shape: tuple[int, int, int]
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    sub_op: str = ""
    ifm2_shape: tuple[int, int, int] | None = None
    ifm2_scalar: bool = False
    ifm_dtype: str = "int8"
    ofm_dtype: str = "int8"
    ifm_layout: str = "NHWC"
    ofm_layout: str = "NHWC"
    activation: Activation = "NONE"
    upscale: str = "NONE"
    scaled: bool = True
    part_kernel_first: bool | None = None

    def __post_init__(self) -> None:
        if self.kind not in OP_KINDS:
            raise ValueError(
                f"unknown NPU op kind {self.kind!r}; valid kinds: {', '.join(OP_KINDS)}"
            )
        if self.sub_op not in _SUB_OPS[self.kind]:
            raise ValueError(
                f"{self.kind} sub_op {self.sub_op!r} is not one of {', '.join(_SUB_OPS[self.kind])}"
            )
        if self.activation not in _FAF_OPS:
            raise ValueError(f"unknown activation {self.activation!r}")

    @property
    def block_type(self) -> NpuBlockType:
        if self.kind == "pooling" and self.sub_op == "REDUCE_SUM":
            return NpuBlockType.ReduceSum
        return {
            "conv2d": NpuBlockType.ConvolutionMxN,
            "depthwise": NpuBlockType.ConvolutionDepthWise,
            "pooling": NpuBlockType.Pooling,
            "elementwise": NpuBlockType.ElementWise,
        }[self.kind]

    @property
    def vela_op(self) -> Op:
        """Vela's internal op type, which picks the output cycles per element."""
        if self.kind == "conv2d":
            return Op.Conv2DBias
        if self.kind == "depthwise":
            return Op.DepthwiseConv2DBias
        if self.kind == "pooling":
            return _POOL_OPS[self.sub_op]
        return _ELEMENTWISE_OPS[self.sub_op]

    @property
    def faf_op(self) -> Op | None:
        return _FAF_OPS[self.activation]

    @property
    def ifm_bits(self) -> int:
        return _DTYPES[self.ifm_dtype].size_in_bits()

    @staticmethod
    def dtype_bits(dtype: str) -> int:
        return _DTYPES[dtype].size_in_bits()

    @property
    def vela_kernel(self) -> Kernel:
        (kh, kw), (sy, sx), (dy, dx) = self.kernel, self.stride, self.dilation
        return Kernel(kw, kh, sx, sy, dx, dy)

    @property
    def is_part_kernel_first(self) -> bool:
        """Weight traversal of a conv2d: as given, else Vela's own utilisation-based choice."""
        if self.kind != "conv2d":
            return False
        if self.part_kernel_first is not None:
            return self.part_kernel_first
        return _choose_kernel_method(
            Shape4D.from_hwc(*self.ifm_shape), self.ifm_bits, self.vela_kernel
        )

    def to_npu_op(self) -> NpuBlockOperation:
        """A Vela API operation with these facts (no addresses, weights or block config)."""
        if self.kind == "conv2d":
            op: NpuBlockOperation = NpuConv2DOperation()
            op.block_traversal = (
                NpuBlockTraversal.PART_KERNEL_FIRST
                if self.is_part_kernel_first
                else NpuBlockTraversal.DEPTH_FIRST
            )
        elif self.kind == "depthwise":
            op = NpuConvDepthWiseOperation()
        elif self.kind == "pooling":
            op = NpuPoolingOperation(NpuPoolingOp[self.sub_op])
        else:
            op = NpuElementWiseOperation(NpuElementWiseOp[self.sub_op])
        op.ifm = _feature_map(self.ifm_shape, self.ifm_dtype, self.ifm_layout, self.scaled)
        op.ofm = _feature_map(self.ofm_shape, self.ofm_dtype, self.ofm_layout, self.scaled)
        if self.ifm2_shape is not None:
            op.ifm2 = _feature_map(self.ifm2_shape, self.ifm_dtype, self.ifm_layout, self.scaled)
            op.ifm2_scalar = 0.0 if self.ifm2_scalar else None
        (kh, kw), (sy, sx), (dy, dx) = self.kernel, self.stride, self.dilation
        op.kernel = NpuKernel(kw, kh, sx, sy, dx, dy)
        if self.activation != "NONE":
            op.activation = NpuActivation(
                {v: k for k, v in _ACTIVATIONS.items()}.get(
                    self.activation, NpuActivationOp.NONE_OR_RELU
                )
            )
            if self.activation == "CLIP":
                op.activation.min = 0.0
        op.ifm_upscale = NpuResamplingMode[self.upscale]
        return op

    @classmethod
    def from_npu_op(cls, op: NpuBlockOperation) -> NpuOpDescription:
        """The description of one Vela API operation (e.g. one stripe from codegen). The
        evaluator describes every stripe of a schedule and the stripes repeat a few shapes,
        so the facts it is made from are read here and each distinct set described once."""
        if not isinstance(op, _BLOCK_OPS):
            raise TypeError(f"not an NPU block operation: {type(op).__name__}")
        k = op.kernel or _UNIT_KERNEL
        ifm, ifm2, ofm, act = op.ifm, op.ifm2, op.ofm, op.activation
        facts = (
            type(op),
            op.block_traversal if isinstance(op, NpuConv2DOperation) else None,
            getattr(op, "sub_op_type", None),
            (k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
            ifm.shape,
            ofm.shape,
            ifm2.shape if ifm2 is not None else None,
            op.ifm2_scalar is not None,
            ifm.data_type,
            ofm.data_type,
            ifm.layout,
            ofm.layout,
            _activation_of(act),
            op.ifm_upscale,
            ifm.quantization is not None
            and ofm.quantization is not None
            and (ifm2 is None or ifm2.quantization is not None),
        )
        return _described(cls, facts)


def _feature_map(
    shape: tuple[int, int, int], dtype: str, layout: str, scaled: bool
) -> NpuFeatureMap:
    fm = NpuFeatureMap()
    fm.shape = NpuShape3D(*shape)
    fm.data_type = _DTYPES[dtype]
    fm.layout = NpuLayout[layout]
    fm.quantization = NpuQuantization(scale_f32=1.0, zero_point=0) if scaled else None
    return fm


_BLOCK_OPS = (NpuConv2DOperation, NpuConvDepthWiseOperation, NpuPoolingOperation,
              NpuElementWiseOperation)  # fmt: skip
_UNIT_KERNEL = NpuKernel(1, 1)


@memo_function(16384)
def _described(cls: type[NpuOpDescription], facts: tuple) -> NpuOpDescription:
    """The description made of the facts `from_npu_op` reads from an operation."""
    (op_type, traversal, sub_op_type, kernel, ifm_shape, ofm_shape, ifm2_shape, ifm2_scalar,
     ifm_dtype, ofm_dtype, ifm_layout, ofm_layout, activation, upscale, scaled) = facts  # fmt: skip
    kind, sub_op, part_kernel_first = _kind_of(op_type, traversal, sub_op_type)
    height, width, stride_y, stride_x, dilation_y, dilation_x = kernel
    return cls(
        kind=kind,
        ifm_shape=tuple(ifm_shape),
        ofm_shape=tuple(ofm_shape),
        kernel=(height, width),
        stride=(stride_y, stride_x),
        dilation=(dilation_y, dilation_x),
        sub_op=sub_op,
        ifm2_shape=tuple(ifm2_shape) if ifm2_shape is not None else None,
        ifm2_scalar=ifm2_scalar,
        ifm_dtype=_DTYPE_NAMES[ifm_dtype],
        ofm_dtype=_DTYPE_NAMES[ofm_dtype],
        ifm_layout=ifm_layout.name,
        ofm_layout=ofm_layout.name,
        activation=activation,
        upscale=upscale.name,
        scaled=scaled,
        part_kernel_first=part_kernel_first,
    )


def _kind_of(
    op_type: type, traversal: NpuBlockTraversal | None, sub_op_type
) -> tuple[OpKind, str, bool | None]:
    if issubclass(op_type, NpuConv2DOperation):
        return "conv2d", "", traversal == NpuBlockTraversal.PART_KERNEL_FIRST
    if issubclass(op_type, NpuConvDepthWiseOperation):
        return "depthwise", "", None
    if issubclass(op_type, NpuPoolingOperation):
        return "pooling", sub_op_type.name, None
    return "elementwise", sub_op_type.name, None


def _activation_of(activation: NpuActivation | None) -> Activation:
    if activation is None:
        return "NONE"
    if activation.op_type in _ACTIVATIONS:
        return _ACTIVATIONS[activation.op_type]  # type: ignore[return-value]
    return "CLIP" if activation.min is not None or activation.max is not None else "NONE"
