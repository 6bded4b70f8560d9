"""Synthetic NPU graphs (NHWC convolutions, depthwise convolutions, residual adds) built from
first principles, for property tests and benchmarks that must not depend on TVM or a model."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cascader.core.graph import CascaderGraph
from cascader.core.graph_json import GraphDocument
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.part import Part
from cascader.core.propagator import Propagator
from cascader.core.tensor import Tensor
from cascader.ethosu.block_config import BlockConfig
from cascader.ethosu.part import EthosuPart

_BLOCK_SIDES = (2, 4, 8)
_BLOCK_DEPTHS = (8, 16, 32)


@dataclass
class _Op:
    inputs: list[int]
    output: int
    propagators: list[Propagator]
    weight_index: int
    macs_per_output: int
    op: str


class GraphBuilder:
    """Builds a graph forwards (input to output); `build` reverses it into the cascader's
    part order. Tensor handles are integer ids."""

    def __init__(self) -> None:
        self._tensors: list[tuple[tuple[int, ...], str, bool]] = []
        self._ops: list[_Op] = []

    def _tensor(self, shape: tuple[int, ...], dtype: str = "int8", constant: bool = False) -> int:
        self._tensors.append((tuple(shape), dtype, constant))
        return len(self._tensors) - 1

    def shape(self, tensor: int) -> tuple[int, ...]:
        return self._tensors[tensor][0]

    def input(self, height: int, width: int, channels: int) -> int:
        return self._tensor((1, height, width, channels))

    def conv(self, x: int, channels: int, kernel: int = 1, stride: int = 1) -> int:
        """A convolution with `same` padding, OHWI weights and a 10-byte-per-channel bias."""
        return self._convolution(x, channels, kernel, stride, depthwise=False)

    def depthwise(self, x: int, kernel: int = 3, stride: int = 1) -> int:
        return self._convolution(x, self.shape(x)[3], kernel, stride, depthwise=True)

    def _convolution(self, x: int, cout: int, kernel: int, stride: int, depthwise: bool) -> int:
        _, height, width, cin = self.shape(x)
        out = self._tensor((1, math.ceil(height / stride), math.ceil(width / stride), cout))
        weights = self._tensor((cout, kernel, kernel, 1 if depthwise else cin), constant=True)
        bias = self._tensor((cout, 10), "uint8", constant=True)
        pad = (kernel - 1) // 2
        grow = kernel - stride
        ifm = Propagator(
            [
                [1, 0, 0, 0, 0],
                [0, stride, 0, 0, grow],
                [0, 0, stride, 0, grow],
                [0, 0, 0, 1, 0] if depthwise else [0, 0, 0, 0, cin],
                [0, 0, 0, 0, 1],
            ],
            [0, -pad, -pad, 0],
        )
        weight = Propagator(
            [
                [0, 0, 0, 1, 0],
                [0, 0, 0, 0, kernel],
                [0, 0, 0, 0, kernel],
                [0, 0, 0, 0, 1 if depthwise else cin],
                [0, 0, 0, 0, 1],
            ],
            [0, 0, 0, 0],
        )
        scale_bias = Propagator([[0, 0, 0, 1, 0], [0, 0, 0, 0, 10], [0, 0, 0, 0, 1]], [0, 0])
        macs = kernel * kernel * (1 if depthwise else cin)
        self._ops.append(
            _Op(
                [x, weights, bias],
                out,
                [ifm, weight, scale_bias],
                1,
                macs,
                "depthwise2d" if depthwise else "conv2d",
            )
        )
        return out

    def add(self, a: int, b: int) -> int:
        """Elementwise add of two equal-shaped tensors."""
        if self.shape(a) != self.shape(b):
            raise ValueError(f"add needs equal shapes, got {self.shape(a)} and {self.shape(b)}")
        out = self._tensor(self.shape(a))
        identity = [[float(i == j) for j in range(5)] for i in range(5)]
        self._ops.append(
            _Op([a, b], out, [Propagator(identity, [0] * 4)] * 2, -1, 1, "binary_elementwise")
        )
        return out

    def _block_configs(self, op: _Op) -> list[BlockConfig]:
        """Output blocks of 2-8 rows/columns and 8-32 channels; cycles grow with the block's
        MACs (compute) and elements (output), as on the NPU."""
        _, height, width, channels = self.shape(op.output)
        configs = []
        for side in _BLOCK_SIDES:
            for depth in _BLOCK_DEPTHS:
                block = (1, min(side, height), min(side, width), min(depth, channels))
                in_shape = op.propagators[0].propagate_shapes(np.asarray([block], dtype=float))[0]
                elements = math.prod(block)
                configs.append(
                    BlockConfig(
                        tuple(int(v) for v in in_shape),
                        block,
                        max(1, elements * op.macs_per_output // 256),
                        max(1, elements // 8),
                    )
                )
        return configs

    def build(
        self,
        outputs: list[int],
        sram_size: int = 262144,
        options: CascaderOptions | None = None,
    ) -> GraphDocument:
        """The graph in reverse topological order with SRAM/FLASH regions: constants homed in
        FLASH, everything else in SRAM (the cascade region)."""
        produced = {op.output for op in self._ops}
        # Reverse creation order is a reverse topological order (ops only read earlier ops).
        ops = list(reversed(self._ops))
        order: list[int] = []
        for op in ops:
            for t in [op.output, *op.inputs]:
                if t not in order:
                    order.append(t)
        for t in range(len(self._tensors)):
            if t not in order:
                order.append(t)
        new_id = {old: new for new, old in enumerate(order)}
        tensors = []
        for old in order:
            shape, dtype, constant = self._tensors[old]
            tensors.append(Tensor(new_id[old], shape, dtype, constant))
        parts: list[Part] = []
        for pid, op in enumerate(ops):
            parts.append(
                EthosuPart(
                    pid,
                    [tensors[new_id[t]] for t in op.inputs],
                    tensors[new_id[op.output]],
                    op.propagators,
                    output_quantum=(1, 2, 2, 8),
                    subkernels=1,
                    block_configs=self._block_configs(op),
                    weight_tensor_idx=op.weight_index,
                    op=op.op,
                )
            )
        graph_inputs = [
            tensors[new_id[t]]
            for t in range(len(self._tensors))
            if t not in produced and not self._tensors[t][2]
        ]
        graph = CascaderGraph(tensors, parts, graph_inputs, [tensors[new_id[t]] for t in outputs])
        regions = {
            "SRAM": MemoryRegion("SRAM", sram_size, 16, 16),
            "FLASH": MemoryRegion("FLASH", 10_000_000, 4, 4),
        }
        home_map = {t.id: ["FLASH" if t.is_constant else "SRAM"] for t in tensors}
        return GraphDocument(graph, regions, home_map, options or CascaderOptions())
