"""Partition a QDQ Relax module: NPU-supported subgraphs become "ethos-u.<op>" composites.

Each composite is matched on the frontend's QDQ form (dequantize -> float op -> quantize, or the
int8 op itself for pure data movement), checked against Vela's constraints, and outlined by
`FuseOpsByPattern(annotate_codegen=True)` into an external function with Codegen "ethos-u".
What no pattern takes stays in "main" and runs on the host; `host_ops` names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import tvm
from tvm import relax
from tvm.relax.dpl import DFPattern, is_const, is_op, is_tuple, wildcard
from tvm.relax.transform import FusionPattern, PatternCheckContext

from cascader.frontend import vela_constraints as vc
from cascader.frontend.softmax import softmax_fits

CODEGEN = "ethos-u"
_MAX_CONCAT_INPUTS = 8


def _dq(data: DFPattern) -> DFPattern:
    return is_op("relax.dequantize")(data, wildcard(), wildcard())


def _q(data: DFPattern) -> DFPattern:
    return is_op("relax.quantize")(data, wildcard(), wildcard())


def _const_scale() -> DFPattern:
    """A bias scale: a constant, or the product input_scale * weight_scale the frontend emits."""
    return is_const() | is_op("relax.multiply")(is_const(), is_const())


def _shape(expr: relax.Expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.ty.shape)


def _dtype(expr: relax.Expr) -> str:
    return str(expr.ty.dtype)


def _const_value(expr: relax.Expr) -> np.ndarray:
    return expr.value.numpy()


def _with_activation(body: DFPattern, annotations: dict[str, DFPattern]) -> DFPattern:
    """An int8 clip (the frontend's fused RELU/RELU6/RELU_N1_TO_1) after `body`."""
    clip = is_op("relax.clip")(body, wildcard(), wildcard())
    annotations["activation"] = clip
    return clip


# ---- conv2d / depthwise_conv2d / transpose conv / fully connected -------------------------


def _conv_patterns(op_name: str, biased: bool, clipped: bool) -> tuple[DFPattern, dict]:
    ifm = wildcard()
    weight = is_const()
    dq_w = _dq(weight)
    kernel = dq_w | is_op("relax.reshape")(dq_w, wildcard())
    conv = is_op(op_name)(_dq(ifm), kernel)
    annotations = {"ifm": ifm, "weight": weight, "op": conv}
    body = conv
    if biased:
        bias = is_const()
        body = is_op("relax.add")(conv, is_op("relax.dequantize")(bias, _const_scale(), wildcard()))
        annotations["bias"] = bias
    root = _q(body)
    annotations["ofm"] = root
    if clipped:
        root = _with_activation(root, annotations)
    return root, annotations


def _fc_patterns(biased: bool, clipped: bool) -> tuple[DFPattern, dict]:
    ifm = wildcard()
    weight = is_const()
    matmul = is_op("relax.matmul")(_dq(ifm), _dq(is_op("relax.permute_dims")(weight) | weight))
    annotations = {"ifm": ifm, "weight": weight, "op": matmul}
    body = matmul
    if biased:
        bias = is_const()
        body = is_op("relax.add")(
            matmul, is_op("relax.dequantize")(bias, _const_scale(), wildcard())
        )
        annotations["bias"] = bias
    root = _q(body)
    annotations["ofm"] = root
    if clipped:
        root = _with_activation(root, annotations)
    return root, annotations


def _check_conv(ctx: PatternCheckContext) -> bool:
    conv = ctx.annotated_expr["op"]
    attrs = conv.attrs
    ifm, ofm = _shape(ctx.annotated_expr["ifm"]), _shape(conv)
    kernel = _shape(conv.args[1])  # HWIO
    if int(attrs.groups) != 1 or str(attrs.kernel_layout) != "HWIO":
        return False
    return (
        vc.dims_in_range(ifm, ofm)
        and vc.batch_is_one(ifm)
        and vc.strides_fit(attrs.strides, ifm, ofm)
        and vc.dilated_kernel_fits(kernel[:2], attrs.dilation)
        and vc.weight_sums_fit(np.moveaxis(_const_value(ctx.annotated_expr["weight"]), 3, 0))
    )


def _check_depthwise(ctx: PatternCheckContext) -> bool:
    conv = ctx.annotated_expr["op"]
    attrs = conv.attrs
    ifm, ofm = _shape(ctx.annotated_expr["ifm"]), _shape(conv)
    groups = int(attrs.groups)
    if groups == 1 or groups != ifm[3] or str(attrs.kernel_layout) != "HWOI":
        return False
    kernel = _shape(conv.args[1])
    weights = _const_value(ctx.annotated_expr["weight"])  # 1HW(C*M)
    return (
        vc.dims_in_range(ifm, ofm)
        and vc.batch_is_one(ifm)
        and vc.strides_within(attrs.strides)
        and vc.depth_multiplier_fits(ifm[3], ofm[3])
        and vc.dilated_kernel_fits(kernel[:2], attrs.dilation)
        and vc.weight_sums_fit(np.moveaxis(weights, 3, 0))
    )


def _check_transpose_conv(ctx: PatternCheckContext) -> bool:
    conv = ctx.annotated_expr["op"]
    attrs = conv.attrs
    ifm, ofm = _shape(ctx.annotated_expr["ifm"]), _shape(conv)
    if int(attrs.groups) != 1 or str(attrs.kernel_layout) != "IOHW":
        return False
    kernel = _shape(conv.args[1])
    return (
        vc.dims_in_range(ifm, ofm)
        and vc.batch_is_one(ifm)
        and vc.transpose_conv_fits(attrs.strides, kernel[2:], ifm, ofm)
    )


def _check_fc(ctx: PatternCheckContext) -> bool:
    weight = ctx.annotated_expr["weight"]
    matmul = ctx.annotated_expr["op"]
    return len(_shape(weight)) == 2 and vc.dims_in_range(_shape(matmul))


# ---- pooling, mean, resize, pad ----------------------------------------------------------------


def _max_pool_pattern(clipped: bool) -> tuple[DFPattern, dict]:
    ifm = wildcard()
    pool = is_op("relax.nn.max_pool2d")(ifm)
    annotations = {"ifm": ifm, "op": pool, "ofm": pool}
    root = _with_activation(pool, annotations) if clipped else pool
    return root, annotations


def _avg_pool_pattern(clipped: bool) -> tuple[DFPattern, dict]:
    ifm = wildcard()
    pool = is_op("relax.nn.avg_pool2d")(is_op("relax.astype")(ifm))
    root = is_op("relax.astype")(pool)
    annotations = {"ifm": ifm, "op": pool, "ofm": root}
    if clipped:
        root = _with_activation(root, annotations)
    return root, annotations


def _check_pool(ctx: PatternCheckContext) -> bool:
    pool = ctx.annotated_expr["op"]
    attrs = pool.attrs
    ifm, ofm = _shape(ctx.annotated_expr["ifm"]), _shape(pool)
    if _dtype(ctx.annotated_expr["ifm"]) != "int8" or str(attrs.layout) != "NHWC":
        return False
    if tuple(int(d) for d in attrs.dilation) != (1, 1) or bool(attrs.ceil_mode):
        return False
    if not (vc.dims_in_range(ifm, ofm) and vc.batch_is_one(ifm)):
        return False
    if pool.op.name == "relax.nn.max_pool2d":
        return vc.strides_within(attrs.strides) and vc.max_pool_kernel_fits(attrs.pool_size)
    padded = any(int(p) for p in attrs.padding)
    return vc.avg_pool_fits(attrs.pool_size, attrs.strides, padded, ifm, ofm)


def _qdq_unary_pattern(op_name: str) -> tuple[DFPattern, dict]:
    ifm = wildcard()
    op = is_op(op_name)(_dq(ifm))
    root = _q(op)
    return root, {"ifm": ifm, "op": op, "ofm": root}


def _check_mean(ctx: PatternCheckContext) -> bool:
    mean = ctx.annotated_expr["op"]
    ifm = _shape(ctx.annotated_expr["ifm"])
    axes = [int(a) for a in mean.attrs.axis] if mean.attrs.axis is not None else []
    return bool(axes) and vc.dims_in_range(ifm) and vc.mean_fits(ifm, axes)


def _check_softmax(ctx: PatternCheckContext) -> bool:
    """Vela runs int8 -> int8 softmax over the channel axis when W x H fits its limit."""
    softmax = ctx.annotated_expr["op"]
    ifm = ctx.annotated_expr["ifm"]
    shape = _shape(ifm)
    axis = int(softmax.attrs.axis)
    return (
        _dtype(ifm) == "int8"
        and _dtype(ctx.annotated_expr["ofm"]) == "int8"
        and axis in (-1, len(shape) - 1)
        and len(shape) <= 4
        and vc.dims_in_range(shape)
        and softmax_fits(shape)
    )


def _resize_patterns() -> list[tuple[DFPattern, dict]]:
    ifm = wildcard()
    nearest = is_op("relax.image.resize2d")(ifm, wildcard())
    ifm_b = wildcard()
    bilinear = is_op("relax.image.resize2d")(_dq(ifm_b), wildcard())
    root_b = _q(bilinear)
    return [
        (root_b, {"ifm": ifm_b, "op": bilinear, "ofm": root_b}),
        (nearest, {"ifm": ifm, "op": nearest, "ofm": nearest}),
    ]


def _check_resize(ctx: PatternCheckContext) -> bool:
    resize = ctx.annotated_expr["op"]
    attrs = resize.attrs
    ifm, ofm = _shape(ctx.annotated_expr["ifm"]), _shape(resize)
    if str(attrs.layout) != "NHWC" or str(attrs.method) not in ("nearest_neighbor", "linear"):
        return False
    if str(attrs.method) == "nearest_neighbor" and _dtype(resize) != "int8":
        return False
    mode = str(attrs.coordinate_transformation_mode)
    if mode not in ("asymmetric", "align_corners", "half_pixel"):
        return False
    return vc.dims_in_range(ifm, ofm) and vc.resize_fits(
        ifm, ofm, mode == "align_corners", mode == "half_pixel"
    )


def _pad_pattern() -> tuple[DFPattern, dict]:
    ifm = wildcard()
    pad = is_op("relax.nn.pad")(ifm)
    return pad, {"ifm": ifm, "op": pad, "ofm": pad}


def _check_pad(ctx: PatternCheckContext) -> bool:
    pad = ctx.annotated_expr["op"]
    attrs = pad.attrs
    ifm = _shape(ctx.annotated_expr["ifm"])
    return (
        _dtype(pad) == "int8"
        and str(attrs.pad_mode) == "constant"
        and vc.dims_in_range(ifm, _shape(pad))
        and vc.pad_fits([int(p) for p in attrs.pad_width], len(ifm))
    )


# ---- elementwise ------------------------------------------------------------------------------

BINARY_OPS = {
    "relax.add": "add",
    "relax.subtract": "sub",
    "relax.multiply": "mul",
    "relax.minimum": "min",
    "relax.maximum": "max",
}


def _binary_pattern(op_name: str, activation: str | None) -> tuple[DFPattern, dict]:
    ifm, ifm2 = wildcard(), wildcard()
    dq, dq2 = _dq(ifm), _dq(ifm2)
    op = is_op(op_name)(dq, dq2)
    body = op
    annotations = {"ifm": ifm, "ifm2": ifm2, "op": op, "ifm_dq": dq, "ifm2_dq": dq2}
    if activation == "relu":
        body = is_op("relax.nn.relu")(op)
        annotations["activation"] = body
    elif activation == "clip":
        body = is_op("relax.clip")(op, wildcard(), wildcard())
        annotations["activation"] = body
    root = _q(body)
    annotations["ofm"] = root
    return root, annotations


def _check_binary(ctx: PatternCheckContext) -> bool:
    op = ctx.annotated_expr["op"]
    ifm, ifm2 = ctx.annotated_expr["ifm"], ctx.annotated_expr["ifm2"]
    shapes = (_shape(ifm), _shape(ifm2), _shape(op))
    if _dtype(ifm) != "int8" or _dtype(ifm2) != "int8":
        return False
    if not (vc.dims_in_range(*shapes) and vc.broadcast_fits(*shapes)):
        return False
    if op.op.name in ("relax.minimum", "relax.maximum"):
        ofm = ctx.annotated_expr["ofm"]
        return _same_qparams(ctx.annotated_expr["ifm_dq"], ofm) and _same_qparams(
            ctx.annotated_expr["ifm2_dq"], ofm
        )
    return True


def _same_qparams(dq: relax.Expr, q: relax.Expr) -> bool:
    """Vela runs MIN/MAX without rescaling: inputs and output must share scale and zero point."""
    pairs = zip(dq.args[1:3], q.args[1:3], strict=True)
    return all(
        isinstance(a, tvm.ir.GenericConst)
        and isinstance(b, tvm.ir.GenericConst)
        and np.allclose(_const_value(a), _const_value(b))
        for a, b in pairs
    )


LUT_OPS = {
    "relax.sigmoid": "sigmoid",
    "relax.tanh": "tanh",
    "relax.nn.leakyrelu": "leaky_relu",
}


def _hard_swish_pattern() -> tuple[DFPattern, dict]:
    ifm = wildcard()
    x = _dq(ifm)
    relu6 = is_op("relax.clip")(is_op("relax.add")(x, is_const()), wildcard(), wildcard())
    op = is_op("relax.divide")(is_op("relax.multiply")(x, relu6), is_const())
    root = _q(op)
    return root, {"ifm": ifm, "op": op, "ofm": root}


def _check_int8_unary(ctx: PatternCheckContext) -> bool:
    ifm = ctx.annotated_expr["ifm"]
    return _dtype(ifm) == "int8" and vc.dims_in_range(_shape(ifm)) and vc.batch_is_one(_shape(ifm))


def _requantize_pattern() -> tuple[DFPattern, dict]:
    ifm = wildcard()
    root = _q(_dq(ifm))
    return root, {"ifm": ifm, "op": root, "ofm": root}


# ---- data movement -------------------------------------------------------------------------

IDENTITY_OPS = {
    "relax.reshape": "reshape",
    "relax.squeeze": "reshape",
    "relax.expand_dims": "reshape",
}


def _movement_pattern(op_name: str) -> tuple[DFPattern, dict]:
    ifm = wildcard()
    op = is_op(op_name)(ifm, varg_default_wildcard=True)
    return op, {"ifm": ifm, "op": op, "ofm": op}


def _check_int8_movement(ctx: PatternCheckContext) -> bool:
    ifm = ctx.annotated_expr["ifm"]
    if isinstance(ifm, tvm.ir.GenericConst) or _dtype(ifm) != "int8":
        return False
    return vc.dims_in_range(_shape(ifm))


def _check_strided_slice(ctx: PatternCheckContext) -> bool:
    if not _check_int8_movement(ctx):
        return False
    op = ctx.annotated_expr["op"]
    rank = len(_shape(ctx.annotated_expr["ifm"]))
    axes = [int(a.value) for a in op.args[1].fields]
    strides = [int(s.value) for s in op.args[4].fields] if len(op.args) > 4 else [1] * len(axes)
    fixed = {0, rank - 1} if rank > 3 else {rank - 1}
    return all(s == 1 for a, s in zip(axes, strides, strict=True) if a % rank in fixed)


def _concat_pattern(arity: int) -> tuple[DFPattern, dict]:
    inputs = [wildcard() for _ in range(arity)]
    op = is_op("relax.concat")(is_tuple([_dq(i) for i in inputs]))
    root = _q(op)
    annotations = {"op": op, "ofm": root} | {f"ifm{i}": x for i, x in enumerate(inputs)}
    return root, annotations


def _check_concat(ctx: PatternCheckContext) -> bool:
    inputs = [v for k, v in ctx.annotated_expr.items() if k.startswith("ifm")]
    return all(_dtype(x) == "int8" for x in inputs) and vc.dims_in_range(
        *(_shape(x) for x in inputs)
    )


# ---- the pattern table --------------------------------------------------------------------


def _fusion(kind: str, built: tuple[DFPattern, dict], check: Callable) -> FusionPattern:
    pattern, annotations = built
    return FusionPattern(f"{CODEGEN}.{kind}", pattern, annotations, check)


def _variants() -> Iterator[tuple[bool, bool]]:
    """(biased, clipped), most specific first: a pattern must claim its trailing clip."""
    yield from ((True, True), (True, False), (False, True), (False, False))


def ethosu_patterns() -> list[FusionPattern]:
    """All NPU patterns, in priority order (longer matches first)."""
    patterns: list[FusionPattern] = []
    for biased, clipped in _variants():
        conv = _conv_patterns("relax.nn.conv2d", biased, clipped)
        patterns.append(_fusion("conv2d", conv, _check_conv))
        patterns.append(_fusion("depthwise_conv2d", conv, _check_depthwise))
        patterns.append(
            _fusion(
                "transpose_conv2d",
                _conv_patterns("relax.nn.conv2d_transpose", biased, clipped),
                _check_transpose_conv,
            )
        )
        patterns.append(_fusion("fully_connected", _fc_patterns(biased, clipped), _check_fc))
    for clipped in (True, False):
        patterns.append(_fusion("max_pool2d", _max_pool_pattern(clipped), _check_pool))
        patterns.append(_fusion("avg_pool2d", _avg_pool_pattern(clipped), _check_pool))
    patterns.append(_fusion("mean", _qdq_unary_pattern("relax.mean"), _check_mean))
    patterns.append(_fusion("softmax", _qdq_unary_pattern("relax.nn.softmax"), _check_softmax))
    patterns.extend(_fusion("resize", built, _check_resize) for built in _resize_patterns())
    for activation in ("relu", "clip", None):
        for op_name, kind in BINARY_OPS.items():
            patterns.append(_fusion(kind, _binary_pattern(op_name, activation), _check_binary))
    patterns.append(_fusion("hard_swish", _hard_swish_pattern(), _check_int8_unary))
    for op_name, kind in LUT_OPS.items():
        patterns.append(_fusion(kind, _qdq_unary_pattern(op_name), _check_int8_unary))
    for arity in range(_MAX_CONCAT_INPUTS, 1, -1):
        patterns.append(_fusion("concatenate", _concat_pattern(arity), _check_concat))
    patterns.append(_fusion("pad", _pad_pattern(), _check_pad))
    patterns.append(
        _fusion("strided_slice", _movement_pattern("relax.strided_slice"), _check_strided_slice)
    )
    patterns.append(_fusion("split", _movement_pattern("relax.split"), _check_int8_movement))
    for op_name, kind in IDENTITY_OPS.items():
        patterns.append(_fusion(kind, _movement_pattern(op_name), _check_int8_movement))
    patterns.append(_fusion("requantize", _requantize_pattern(), _check_int8_unary))
    return patterns


def partition_for_ethosu(mod: tvm.IRModule) -> tvm.IRModule:
    """Outline NPU-supported subgraphs of "main" into external "ethos-u" functions.

    Neighbouring composites merge into one function (as the original flow's compiler regions
    did), so the cascader sees whole NPU subgraphs rather than single operators.
    """
    return tvm.transform.Sequential(
        [
            relax.transform.FuseOpsByPattern(ethosu_patterns(), bind_constants=True),
            relax.transform.MergeCompositeFunctions(),
            relax.transform.DeadCodeElimination(["main"]),
        ]
    )(mod)


# Relax op -> the TFLite builtin it came from, for ops left on the host. Dequantize, astype,
# clips and relus are the frontend's QDQ and fused-activation plumbing, not operators.
_TFLITE_NAMES = {
    "relax.nn.softmax": "SOFTMAX",
    "relax.nn.log_softmax": "LOG_SOFTMAX",
    "relax.nn.conv2d": "CONV_2D",
    "relax.nn.conv2d_transpose": "TRANSPOSE_CONV",
    "relax.matmul": "FULLY_CONNECTED",
    "relax.nn.avg_pool2d": "AVERAGE_POOL_2D",
    "relax.nn.max_pool2d": "MAX_POOL_2D",
    "relax.add": "ADD",
    "relax.subtract": "SUB",
    "relax.multiply": "MUL",
    "relax.divide": "DIV",
    "relax.minimum": "MINIMUM",
    "relax.maximum": "MAXIMUM",
    "relax.mean": "MEAN",
    "relax.concat": "CONCATENATION",
    "relax.nn.pad": "PAD",
    "relax.image.resize2d": "RESIZE",
    "relax.sigmoid": "LOGISTIC",
    "relax.tanh": "TANH",
    "relax.nn.leakyrelu": "LEAKY_RELU",
    "relax.reshape": "RESHAPE",
    "relax.strided_slice": "STRIDED_SLICE",
    "relax.split": "SPLIT",
    "relax.permute_dims": "TRANSPOSE",
}
_PLUMBING = frozenset(
    {"relax.dequantize", "relax.astype", "relax.clip", "relax.nn.relu", "relax.quantize"}
)


def host_ops(mod: tvm.IRModule) -> list[str]:
    """Operators "main" still computes itself, in program order, by TFLite builtin name.

    A quantize counts as QUANTIZE only when it requantizes (its input is a dequantize or a
    float graph input); otherwise it closes the float op before it.
    """
    bound: dict[relax.Var, relax.Expr] = {}
    names: list[str] = []
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            bound[binding.var] = value
            if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
                continue
            op = value.op.name
            if op == "relax.quantize":
                source = bound.get(value.args[0], value.args[0])
                is_requantize = not isinstance(source, relax.Call) or (
                    isinstance(source.op, tvm.ir.Op) and source.op.name == "relax.dequantize"
                )
                if is_requantize:
                    names.append("QUANTIZE")
            elif op == "relax.permute_dims" and isinstance(value.args[0], tvm.ir.GenericConst):
                continue
            elif op not in _PLUMBING:
                names.append(_TFLITE_NAMES.get(op, op.removeprefix("relax.").upper()))
    return names
