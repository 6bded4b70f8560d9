"""CascaderGraph: tensors and parts, parts in reverse topological order with ids = positions."""

from __future__ import annotations

from cascader.core.part import Part
from cascader.core.tensor import Tensor
from cascader.memo import Memo


class CascaderGraph:
    """A graph of parts. `parts[i].id == i` and every part comes before the parts producing its
    inputs (reverse topological order, outputs first), which is the order plans grow in.
    Consumers/producers are derived here: one consumer entry per input slot, as the original
    counted them (a part reading a tensor twice consumes it twice)."""

    def __init__(
        self,
        tensors: list[Tensor],
        parts: list[Part],
        input_tensors: list[Tensor],
        output_tensors: list[Tensor],
    ) -> None:
        self.tensors = list(tensors)
        self.parts = list(parts)
        self.input_tensors = list(input_tensors)
        self.output_tensors = list(output_tensors)
        # The plan contexts' memos that depend on this graph and its regions alone, by
        # (regions, cascade region): shared by its cascader runs (`plan_context._SystemMemos`).
        self.run_memos: Memo[tuple, object] = Memo("CascaderGraph.run_memos", 64)
        for position, tensor in enumerate(self.tensors):
            if tensor.id != position:
                raise ValueError(f"tensor at position {position} has id {tensor.id}")
            tensor.producers.clear()
            tensor.consumers.clear()
        for position, part in enumerate(self.parts):
            if part.id != position:
                raise ValueError(f"part at position {position} has id {part.id}")
            part.output.producers.append(part)
            for tensor in part.inputs:
                tensor.consumers.append(part)
        for part in self.parts:
            for tensor in part.inputs:
                for producer in tensor.producers:
                    if producer.id <= part.id:
                        raise ValueError(
                            f"parts are not in reverse topological order: part {producer.id} "
                            f"produces an input of part {part.id}"
                        )
        for tensor in self.tensors:
            if len(tensor.producers) > 1:
                raise ValueError(f"tensor {tensor.id} has more than one producer")

    def __repr__(self) -> str:
        return f"CascaderGraph(parts={len(self.parts)}, tensors={len(self.tensors)})"

    @property
    def all_parts_mask(self) -> int:
        return (1 << len(self.parts)) - 1
