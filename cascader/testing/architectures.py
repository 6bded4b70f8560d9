"""Real architectures users bring, built with the project's model builder (random weights,
int8, no TensorFlow): a U-Net, an EfficientNet-B0-like network, a ResNet-50-like network,
MobileNetV1 1.0, a DS-CNN keyword spotter, MobileNetV2 0.35 at 96x96 and a person detector
(MobileNetV1 0.25 on 192x192 grey images). They are the shapes a schedule must handle well
beyond the shared models: concatenated skips and transpose-conv up paths, squeeze-excite
and swish, bottlenecks with quantized PAD, wide 224x224 activations, a 10x4 stride-(2, 1)
first convolution, and small networks whose first layers hold most of their activations.

Building one at 224x224 evaluates every layer on the calibration batch in float numpy (tens
of seconds), so `build_cached` keeps the bytes under `.cache/models/` (git ignores it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cascader.testing.tflite_builder import ModelBuilder, Tensor

_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "models"
_CALIBRATION = 2  # samples: quantisation ranges only need to be plausible


def unet(seed: int = 0, size: int = 128) -> ModelBuilder:
    """Encoder 16/32/64/128 with a 256-channel bottleneck; decoder of stride-2 transpose
    convolutions, each concatenated with its encoder skip; a 2-channel output."""
    b = ModelBuilder(seed, _CALIBRATION, name=f"unet {size}")
    x = b.input((1, size, size, 3))
    skips = []
    for channels in (16, 32, 64, 128):
        x = b.conv2d(x, channels, kernel=3, activation="RELU")
        x = b.conv2d(x, channels, kernel=3, activation="RELU")
        skips.append(x)
        x = b.max_pool2d(x, pool=2)
    x = b.conv2d(x, 256, kernel=3, activation="RELU")
    x = b.conv2d(x, 256, kernel=3, activation="RELU")
    for channels, skip in zip((128, 64, 32, 16), reversed(skips), strict=True):
        up = b.transpose_conv(x, channels, kernel=3, stride=2)
        x = b.concatenation([up, skip], axis=-1)
        x = b.conv2d(x, channels, kernel=3, activation="RELU")
        x = b.conv2d(x, channels, kernel=3, activation="RELU")
    b.output(b.conv2d(x, 2, kernel=1, activation="NONE"))
    return b


def _swish(b: ModelBuilder, x: Tensor) -> Tensor:
    """x * sigmoid(x), as TFLite writes EfficientNet's swish: LOGISTIC then MUL."""
    return b.mul(x, b.logistic(x))


def _mbconv(b: ModelBuilder, x: Tensor, expand: int, out: int, kernel: int, stride: int) -> Tensor:
    """Inverted residual with squeeze-excite: expand, depthwise, global mean -> reduce ->
    expand -> sigmoid -> broadcast multiply, project, residual add."""
    channels = x.shape[3] * expand
    y = x if expand == 1 else _swish(b, b.conv2d(x, channels, kernel=1, activation="NONE"))
    y = _swish(b, b.depthwise_conv2d(y, kernel=kernel, stride=stride, activation="NONE"))
    squeezed = b.mean(y, keep_dims=True)
    squeezed = _swish(b, b.conv2d(squeezed, max(1, x.shape[3] // 4), kernel=1, activation="NONE"))
    gate = b.logistic(b.conv2d(squeezed, channels, kernel=1, activation="NONE"))
    y = b.mul(y, gate)
    y = b.conv2d(y, out, kernel=1, activation="NONE")
    if stride == 1 and x.shape[3] == out:
        y = b.add(x, y)
    return y


# (expansion, output channels, repeats, stride, kernel) per stage, as in EfficientNet-B0.
_EFFICIENTNET_B0 = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
                    (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3))  # fmt: skip


def efficientnet_b0_like(seed: int = 0, size: int = 224, classes: int = 1000) -> ModelBuilder:
    b = ModelBuilder(seed, _CALIBRATION, name=f"efficientnet_b0_like {size}")
    x = b.conv2d(b.input((1, size, size, 3)), 32, kernel=3, stride=2, activation="NONE")
    x = _swish(b, x)
    for expand, out, repeats, stride, kernel in _EFFICIENTNET_B0:
        for i in range(repeats):
            x = _mbconv(b, x, expand, out, kernel, stride if i == 0 else 1)
    x = _swish(b, b.conv2d(x, 1280, kernel=1, activation="NONE"))
    x = b.mean(x, keep_dims=False)
    b.output(b.softmax(b.fully_connected(x, classes)))
    return b


def _bottleneck(b: ModelBuilder, x: Tensor, width: int, stride: int) -> Tensor:
    """1x1 reduce, 3x3 (strided through an explicit quantized PAD and VALID padding, as TFLite
    converts a stride-2 ResNet-50 block), 1x1 expand, projection shortcut where shapes change."""
    y = b.conv2d(x, width, kernel=1, activation="RELU")
    if stride == 2:
        y = b.pad(y, ((0, 0), (1, 1), (1, 1), (0, 0)))
        y = b.conv2d(y, width, kernel=3, stride=2, padding="VALID", activation="RELU")
    else:
        y = b.conv2d(y, width, kernel=3, activation="RELU")
    y = b.conv2d(y, 4 * width, kernel=1, activation="NONE")
    shortcut = x
    if stride != 1 or x.shape[3] != 4 * width:
        shortcut = b.conv2d(x, 4 * width, kernel=1, stride=stride, activation="NONE")
    return b.add(shortcut, y, activation="RELU")


def resnet50_like(seed: int = 0, size: int = 224, classes: int = 1000) -> ModelBuilder:
    b = ModelBuilder(seed, _CALIBRATION, name=f"resnet50_like {size}")
    x = b.pad(b.input((1, size, size, 3)), ((0, 0), (3, 3), (3, 3), (0, 0)))
    x = b.conv2d(x, 64, kernel=7, stride=2, padding="VALID", activation="RELU")
    x = b.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    x = b.max_pool2d(x, pool=3, stride=2, padding="VALID")
    for width, repeats, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(repeats):
            x = _bottleneck(b, x, width, stride if i == 0 else 1)
    x = b.mean(x, keep_dims=False)
    b.output(b.softmax(b.fully_connected(x, classes)))
    return b


def mobilenet_v1(
    seed: int = 0, size: int = 224, alpha: float = 1.0, classes: int = 1000, channels: int = 3
) -> ModelBuilder:
    """MobileNetV1: a strided 3x3 stem, 13 depthwise/pointwise pairs, mean, classifier."""
    b = ModelBuilder(seed, _CALIBRATION, name=f"mobilenet_v1_{alpha} {size}")
    x = b.conv2d(b.input((1, size, size, channels)), int(32 * alpha), kernel=3, stride=2,
                 activation="RELU6")  # fmt: skip
    plan = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5,
            (1024, 2), (1024, 1))  # fmt: skip
    for channels, stride in plan:
        x = b.depthwise_conv2d(x, kernel=3, stride=stride, activation="RELU6")
        x = b.conv2d(x, int(channels * alpha), kernel=1, activation="RELU6")
    x = b.mean(x, keep_dims=False)
    b.output(b.softmax(b.fully_connected(x, classes)))
    return b


def person_detection(seed: int = 0, size: int = 192) -> ModelBuilder:
    """The person detector of TFLite Micro's example: MobileNetV1 0.25 on grey images (192x192
    there), two classes."""
    return mobilenet_v1(seed, size=size, alpha=0.25, classes=2, channels=1)


def _divisible(channels: float) -> int:
    """MobileNetV2's channel rounding: to the nearest multiple of 8, never 10% below."""
    rounded = max(8, int(channels + 4) // 8 * 8)
    return rounded + 8 if rounded < 0.9 * channels else rounded


# (expansion, output channels, repeats, stride) per stage, as in MobileNetV2.
_MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                 (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip


def mobilenet_v2(
    seed: int = 0, size: int = 96, alpha: float = 0.35, classes: int = 1000
) -> ModelBuilder:
    """MobileNetV2: a strided stem, inverted residuals (expand, depthwise, project, residual
    ADD), a 1280-channel head, mean, classifier."""
    b = ModelBuilder(seed, _CALIBRATION, name=f"mobilenet_v2_{alpha} {size}")
    x = b.conv2d(b.input((1, size, size, 3)), _divisible(32 * alpha), kernel=3, stride=2,
                 activation="RELU6")  # fmt: skip
    for expansion, out, repeats, stride in _MOBILENET_V2:
        for i in range(repeats):
            y = x
            if expansion != 1:
                y = b.conv2d(y, x.shape[3] * expansion, kernel=1, activation="RELU6")
            y = b.depthwise_conv2d(y, kernel=3, stride=stride if i == 0 else 1,
                                   activation="RELU6")  # fmt: skip
            y = b.conv2d(y, _divisible(out * alpha), kernel=1, activation="NONE")
            x = b.add(x, y) if y.shape == x.shape else y
    x = b.conv2d(x, 1280, kernel=1, activation="RELU6")
    x = b.mean(x, keep_dims=False)
    b.output(b.softmax(b.fully_connected(x, classes)))
    return b


def ds_cnn(seed: int = 0, channels: int = 64, classes: int = 12) -> ModelBuilder:
    """The keyword spotter: 49x10 MFCCs, a 10x4 stride-(2, 1) first convolution, four
    depthwise-separable blocks, mean, classifier."""
    b = ModelBuilder(seed, _CALIBRATION, name="ds_cnn")
    x = b.conv2d(b.input((1, 49, 10, 1)), channels, kernel=(10, 4), stride=(2, 1),
                 activation="RELU")  # fmt: skip
    for _ in range(4):
        x = b.depthwise_conv2d(x, kernel=3, activation="RELU")
        x = b.conv2d(x, channels, kernel=1, activation="RELU")
    x = b.mean(x, keep_dims=False)
    b.output(b.softmax(b.fully_connected(x, classes)))
    return b


ARCHITECTURES: dict[str, Callable[[], ModelBuilder]] = {
    "unet": unet,
    "efficientnet_b0_like": efficientnet_b0_like,
    "resnet50_like": resnet50_like,
    "mobilenet_v1_100_224": mobilenet_v1,
    "ds_cnn": ds_cnn,
    "mobilenet_v2_035_96": mobilenet_v2,
    "person_detection_192": person_detection,
}


def build_cached(name: str) -> Path:
    """The architecture's .tflite, built once and kept under `.cache/models/` (the builder
    is deterministic for a seed, so the cached bytes are what a fresh build gives)."""
    path = _CACHE / f"{name}.tflite"
    if not path.is_file():
        data = ARCHITECTURES[name]().build()
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")  # one per process: test workers race
        partial.write_bytes(data)
        partial.replace(path)
    return path
