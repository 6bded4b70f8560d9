"""Ready-made int8 networks for tests and examples, all built with `ModelBuilder`.

Every function returns the populated builder: `.build()` gives the flatbuffer, `.evaluate()` the
float reference. Same arguments and seed give byte-identical models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cascader.testing.tflite_builder import ModelBuilder, Tensor

Shape = tuple[int, ...]
_MAP = (1, 8, 8, 16)


def _unary(method: str, low: float = -1.0, high: float = 1.0) -> Callable[..., list[Tensor]]:
    def make(b: ModelBuilder, shape: Shape = _MAP, **params: Any) -> list[Tensor]:
        return [getattr(b, method)(b.input(shape, low, high), **params)]

    return make


def _binary(method: str) -> Callable[..., list[Tensor]]:
    def make(
        b: ModelBuilder, shape: Shape = _MAP, other_shape: Shape | None = None, **params: Any
    ) -> list[Tensor]:
        return [getattr(b, method)(b.input(shape), b.input(other_shape or shape), **params)]

    return make


def _conv2d(b: ModelBuilder, shape: Shape = (1, 16, 16, 8), filters: int = 16, **p: Any) -> list:
    return [b.conv2d(b.input(shape), filters, **p)]


def _transpose_conv(b: ModelBuilder, shape: Shape = _MAP, filters: int = 8, **p: Any) -> list:
    return [b.transpose_conv(b.input(shape), filters, **p)]


def _fully_connected(b: ModelBuilder, shape: Shape = (1, 64), units: int = 16, **p: Any) -> list:
    return [b.fully_connected(b.input(shape), units, **p)]


def _concatenation(
    b: ModelBuilder, shapes: Sequence[Shape] = ((1, 8, 8, 8), (1, 8, 8, 16)), **p: Any
) -> list:
    return [b.concatenation([b.input(s) for s in shapes], **p)]


def _split(b: ModelBuilder, shape: Shape = _MAP, num_splits: int = 2, **p: Any) -> list:
    return b.split(b.input(shape), num_splits, **p)


def _with_defaults(method: str, **defaults: Any) -> Callable[..., list[Tensor]]:
    def make(b: ModelBuilder, shape: Shape = _MAP, **params: Any) -> list[Tensor]:
        return [getattr(b, method)(b.input(shape), **{**defaults, **params})]

    return make


_SINGLE_OPS: dict[str, Callable[..., list[Tensor]]] = {
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _with_defaults("depthwise_conv2d", kernel=3),
    "FULLY_CONNECTED": _fully_connected,
    "MAX_POOL_2D": _with_defaults("max_pool2d", pool=2),
    "AVERAGE_POOL_2D": _with_defaults("average_pool2d", pool=2),
    "ADD": _binary("add"),
    "SUB": _binary("sub"),
    "MUL": _binary("mul"),
    "MINIMUM": _binary("minimum"),
    "MAXIMUM": _binary("maximum"),
    "RESHAPE": _with_defaults("reshape", new_shape=(1, 64, 16)),
    "CONCATENATION": _concatenation,
    "PAD": _with_defaults("pad", paddings=((0, 0), (1, 1), (2, 2), (0, 0))),
    "MEAN": _with_defaults("mean", axes=(1, 2), keep_dims=True),
    "RESIZE_NEAREST_NEIGHBOR": _with_defaults("resize_nearest_neighbor", size=(16, 16)),
    "RESIZE_BILINEAR": _with_defaults("resize_bilinear", size=(16, 16)),
    "TRANSPOSE_CONV": _transpose_conv,
    "STRIDED_SLICE": _with_defaults("strided_slice", begin=(0, 2, 0, 4), end=(1, 6, 8, 12)),
    "SPLIT": _split,
    "LOGISTIC": _unary("logistic", -6.0, 6.0),
    "TANH": _unary("tanh", -3.0, 3.0),
    "HARD_SWISH": _unary("hard_swish", -5.0, 5.0),
    "LEAKY_RELU": _unary("leaky_relu", -2.0, 2.0),
    "SOFTMAX": _unary("softmax", -4.0, 4.0),
    "QUANTIZE": _unary("quantize"),
}

OP_KINDS: tuple[str, ...] = tuple(_SINGLE_OPS)


def single_op(kind: str, seed: int = 0, **params: Any) -> ModelBuilder:
    """A model of one `kind` operator fed by graph inputs; `params` go to the builder method
    (plus `shape`, `other_shape` for binary ops, `shapes` for CONCATENATION)."""
    if kind not in _SINGLE_OPS:
        raise ValueError(f"unknown op kind {kind!r}; expected one of {', '.join(OP_KINDS)}")
    b = ModelBuilder(seed, name=f"single {kind} {params}")
    b.output(*_SINGLE_OPS[kind](b, **params))
    return b


def single_op_model(kind: str, seed: int = 0, **params: Any) -> bytes:
    return single_op(kind, seed, **params).build()


# ------------------------------------------------------------------------ compositions
def host_op(b: ModelBuilder, x: Tensor) -> Tensor:
    """An operator that Vela 5.2 and our partition both leave on the CPU (a 3x nearest
    resize), then a 3x3/3 max pool on the NPU that gives back `x`'s shape and values: the
    way tests put a host op between NPU operators."""
    _, height, width, _ = x.shape
    return b.max_pool2d(b.resize_nearest_neighbor(x, (3 * height, 3 * width)), pool=3)


def chain(seed: int = 0) -> ModelBuilder:
    """A straight line: explicit PAD, strided conv, depthwise, pointwise, pooling, classifier."""
    b = ModelBuilder(seed, name="chain")
    x = b.input((1, 32, 32, 3))
    x = b.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    x = b.conv2d(x, 16, kernel=3, stride=2, padding="VALID", activation="RELU6")
    x = b.depthwise_conv2d(x, kernel=3, activation="RELU6")
    x = b.conv2d(x, 24, kernel=1, activation="NONE")
    x = b.hard_swish(x)
    x = b.max_pool2d(x, pool=2)
    x = b.mean(x, keep_dims=False)
    b.output(b.softmax(b.fully_connected(x, 10)))
    return b


def branches(seed: int = 0) -> ModelBuilder:
    """Three parallel branches from one tensor: a sigmoid-gated product plus a pooled path."""
    b = ModelBuilder(seed, name="branches")
    x = b.input((1, 16, 16, 16))
    value = b.conv2d(x, 16, kernel=1, activation="RELU")
    gate = b.logistic(b.conv2d(x, 16, kernel=3, activation="NONE"))
    pooled = b.conv2d(b.average_pool2d(x, pool=3, stride=1, padding="SAME"), 16, kernel=1)
    b.output(b.add(b.mul(value, gate), pooled))
    return b


def residual(seed: int = 0, blocks: int = 2) -> ModelBuilder:
    """ResNet basic blocks: two 3x3 convs and an identity skip joined by ADD(RELU)."""
    b = ModelBuilder(seed, name="residual")
    x = b.conv2d(b.input((1, 16, 16, 8)), 16, kernel=3, activation="RELU")
    for _ in range(blocks):
        y = b.conv2d(x, 16, kernel=3, activation="RELU")
        y = b.conv2d(y, 16, kernel=3, activation="NONE")
        x = b.add(x, y, activation="RELU")
    b.output(x)
    return b


def concat_skip(seed: int = 0) -> ModelBuilder:
    """U-Net step: downsample, upsample with TRANSPOSE_CONV, concatenate the skip, fuse."""
    b = ModelBuilder(seed, name="concat_skip")
    x = b.input((1, 16, 16, 8))
    skip = b.conv2d(x, 8, kernel=3, activation="RELU")
    down = b.conv2d(skip, 16, kernel=3, stride=2, activation="RELU")
    down = b.conv2d(down, 16, kernel=3, activation="RELU")
    up = b.transpose_conv(down, 8, kernel=3, stride=2)
    x = b.concatenation([skip, up], axis=-1)
    b.output(b.conv2d(x, 8, kernel=1, activation="NONE"))
    return b


COMPOSITIONS: dict[str, Callable[..., ModelBuilder]] = {
    "chain": chain,
    "branches": branches,
    "residual": residual,
    "concat_skip": concat_skip,
}


# ------------------------------------------------------------------------ example network
# (expansion, output channels, stride of the first block, blocks) per stage, as in MobileNetV2.
_MOBILENET_STAGES = ((1, 16, 1, 1), (4, 24, 2, 2), (4, 32, 2, 3), (4, 48, 2, 2), (4, 64, 1, 1))


def _inverted_residual(b: ModelBuilder, x: Tensor, expansion: int, out: int, stride: int) -> Tensor:
    y = x
    if expansion != 1:
        y = b.conv2d(y, x.shape[3] * expansion, kernel=1, activation="RELU6")
    y = b.depthwise_conv2d(y, kernel=3, stride=stride, activation="RELU6")
    y = b.conv2d(y, out, kernel=1, activation="NONE")
    if stride == 1 and x.shape[3] == out:
        y = b.add(x, y)
    return y


def mobilenet_like(
    input: Shape = (96, 96, 3), seed: int = 0, classes: int = 10, head: int = 128
) -> ModelBuilder:
    """MobileNetV2-style classifier: strided stem, inverted-residual blocks with residual ADDs,
    1x1 head, global MEAN, FULLY_CONNECTED and SOFTMAX (36 ops at the defaults)."""
    b = ModelBuilder(seed, name=f"mobilenet_like {'x'.join(map(str, input))}")
    x = b.conv2d(b.input((1, *input)), 16, kernel=3, stride=2, activation="RELU6")
    for expansion, out, stride, repeats in _MOBILENET_STAGES:
        for i in range(repeats):
            x = _inverted_residual(b, x, expansion, out, stride if i == 0 else 1)
    x = b.conv2d(x, head, kernel=1, activation="RELU6")
    x = b.mean(x, keep_dims=False)
    b.output(b.softmax(b.fully_connected(x, classes)))
    return b


# ------------------------------------------------------------------------ catalogue
# Single-op variants covering the parameters that change an op's lowering: stride, dilation,
# padding, kernel shape, depth multiplier, broadcasting, fused activations, resize modes.
_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    **{kind: (kind, {}) for kind in OP_KINDS},
    "CONV_2D-stride2": ("CONV_2D", {"stride": 2}),
    "CONV_2D-dilation2": ("CONV_2D", {"dilation": 2}),
    "CONV_2D-valid-3x5": ("CONV_2D", {"padding": "VALID", "kernel": (3, 5)}),
    "CONV_2D-stride2-valid-relu6": (
        "CONV_2D",
        {"stride": 2, "padding": "VALID", "activation": "RELU6"},
    ),
    "DEPTHWISE_CONV_2D-multiplier2": ("DEPTHWISE_CONV_2D", {"depth_multiplier": 2}),
    "DEPTHWISE_CONV_2D-multiplier8-1ch": (
        "DEPTHWISE_CONV_2D",
        {"shape": (1, 8, 8, 1), "depth_multiplier": 8},
    ),
    "DEPTHWISE_CONV_2D-stride2-valid": ("DEPTHWISE_CONV_2D", {"stride": 2, "padding": "VALID"}),
    "DEPTHWISE_CONV_2D-dilation2": ("DEPTHWISE_CONV_2D", {"dilation": 2, "activation": "NONE"}),
    "FULLY_CONNECTED-relu": ("FULLY_CONNECTED", {"activation": "RELU"}),
    "FULLY_CONNECTED-4d-input": ("FULLY_CONNECTED", {"shape": (1, 4, 4, 8)}),
    "FULLY_CONNECTED-1x1-4d-input": ("FULLY_CONNECTED", {"shape": (1, 1, 1, 64)}),
    "MAX_POOL_2D-3x3-stride2-same": ("MAX_POOL_2D", {"pool": 3, "stride": 2, "padding": "SAME"}),
    "AVERAGE_POOL_2D-3x3-stride1-same": (
        "AVERAGE_POOL_2D",
        {"pool": 3, "stride": 1, "padding": "SAME"},
    ),
    "ADD-relu": ("ADD", {"activation": "RELU"}),
    "ADD-broadcast-channel": ("ADD", {"other_shape": (1, 1, 1, 16)}),
    "SUB-broadcast-row": ("SUB", {"other_shape": (1, 1, 8, 16)}),
    "MUL-broadcast-spatial": ("MUL", {"other_shape": (1, 8, 8, 1)}),
    "MINIMUM-broadcast": ("MINIMUM", {"other_shape": (1, 1, 1, 16)}),
    "MAXIMUM-broadcast": ("MAXIMUM", {"other_shape": (1, 8, 1, 16)}),
    "CONCATENATION-width": (
        "CONCATENATION",
        {"shapes": ((1, 8, 4, 16), (1, 8, 8, 16)), "axis": 2},
    ),
    "MEAN-no-keep-dims": ("MEAN", {"keep_dims": False}),
    "RESIZE_NEAREST_NEIGHBOR-align-corners": (
        "RESIZE_NEAREST_NEIGHBOR",
        {"size": (15, 15), "align_corners": True},
    ),
    "RESIZE_BILINEAR-half-pixel": (
        "RESIZE_BILINEAR",
        {"size": (16, 16), "half_pixel_centers": True},
    ),
    "RESIZE_BILINEAR-align-corners": ("RESIZE_BILINEAR", {"size": (15, 15), "align_corners": True}),
    "TRANSPOSE_CONV-valid": ("TRANSPOSE_CONV", {"padding": "VALID"}),
    "SPLIT-height-4": ("SPLIT", {"num_splits": 4, "axis": 1}),
    "SOFTMAX-vector-beta": ("SOFTMAX", {"shape": (1, 10), "beta": 0.5}),
    "LEAKY_RELU-alpha0.1": ("LEAKY_RELU", {"alpha": 0.1}),
}


def _variant(kind: str, params: dict[str, Any]) -> Callable[[], ModelBuilder]:
    return lambda: single_op(kind, **params)


# Every ready-made model by case name: each op kind, its variants, the compositions and the
# example network. The builder tests run all of them; any test wanting many valid models can.
CATALOGUE: dict[str, Callable[[], ModelBuilder]] = {
    **{name: _variant(kind, params) for name, (kind, params) in _VARIANTS.items()},
    **COMPOSITIONS,
    "mobilenet_like": mobilenet_like,
}
