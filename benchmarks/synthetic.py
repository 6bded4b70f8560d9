"""MobileNet-like synthetic graphs for the cascader core benchmarks."""

from __future__ import annotations

from cascader.core.graph_json import GraphDocument
from cascader.core.options import CascaderOptions
from cascader.ethosu.synthetic import GraphBuilder


def mobilenet_like(parts: int, resolution: int = 112, sram_size: int = 512 * 1024) -> GraphDocument:
    """A chain of inverted-residual blocks (1x1 expand, 3x3 depthwise, 1x1 project, and a
    residual add when the block keeps its shape) after a 3x3 stride-2 stem, cut at exactly
    `parts` parts. Every third block downsamples and widens, as MobileNetV2 does."""
    builder = GraphBuilder()
    x = builder.conv(builder.input(resolution, resolution, 3), 16, kernel=3, stride=2)
    count, block, channels = 1, 0, 16
    while count < parts:
        downsample = block % 3 == 2 and builder.shape(x)[1] > 7
        out_channels = min(channels * 2, 256) if downsample else channels
        shortcut = x
        steps = [
            lambda t, c=channels * 4: builder.conv(t, c),
            lambda t, s=2 if downsample else 1: builder.depthwise(t, 3, s),
            lambda t, c=out_channels: builder.conv(t, c),
        ]
        for step in steps:
            if count == parts:
                break
            x = step(x)
            count += 1
        if count < parts and not downsample and builder.shape(x) == builder.shape(shortcut):
            x = builder.add(x, shortcut)
            count += 1
        channels = out_channels
        block += 1
    return builder.build([x], sram_size, CascaderOptions(enable_striping=True))
