"""BlockConfig: one valid NPU block shape for an op and what a block of it costs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockConfig:
    """Input/output block shapes (in the tensors' layouts) and the cycles one block takes to
    compute and to write out. The cascader picks among an op's valid block configs per stripe."""

    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    compute_cycles: int
    output_cycles: int

    def to_json(self) -> dict:
        return {
            "input_shape": list(self.input_shape),
            "output_shape": list(self.output_shape),
            "compute_cycles": int(self.compute_cycles),
            "output_cycles": int(self.output_cycles),
        }

    @classmethod
    def from_json(cls, data: dict) -> BlockConfig:
        return cls(
            input_shape=tuple(int(v) for v in data["input_shape"]),
            output_shape=tuple(int(v) for v in data["output_shape"]),
            compute_cycles=int(data["compute_cycles"]),
            output_cycles=int(data["output_cycles"]),
        )
