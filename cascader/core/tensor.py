"""Tensor: a value flowing between parts, with the byte size the cascader budgets for it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cascader.core.floats import f32

DTYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float16": 2,
    "float32": 4,
}


@dataclass(eq=False)
class Tensor:
    """A graph tensor. `id` is its position in the graph's tensor order. Identity, not value,
    distinguishes tensors (two equal-shaped activations are different tensors)."""

    id: int
    shape: tuple[int, ...]
    dtype: str = "int8"
    is_constant: bool = False
    compression_ratio: float = 1.0
    producers: list = field(default_factory=list, repr=False)
    consumers: list = field(default_factory=list, repr=False)
    # Buffer bytes per (buffer mode, stripe configs), filled by TensorConfigTable: a pure
    # function of the tensor, kept with it so a sweep's cascader runs size each buffer once.
    buffer_sizes: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown dtype {self.dtype!r}; known: {', '.join(DTYPE_BYTES)}")
        self.shape = tuple(int(v) for v in self.shape)
        self.dtype_bytes = DTYPE_BYTES[self.dtype]
        self.compression_ratio = f32(self.compression_ratio)
        self.size = self.scaled_bytes(math.prod(self.shape))

    def __hash__(self) -> int:
        return self.id

    def scaled_bytes(self, elements: int) -> int:
        """Bytes for `elements` elements of this tensor after compression, truncated as the
        original truncated its float product."""
        return int(f32(f32(elements * self.dtype_bytes) * self.compression_ratio))
