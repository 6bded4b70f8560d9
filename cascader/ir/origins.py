"""Which operator of the TFLite model an NPU op stands for: what per-op results are named by,
as Vela's per-layer report names its layers."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TfliteOrigin"]


@dataclass(frozen=True)
class TfliteOrigin:
    """A TFLite operator: its output tensors' names, its index in subgraph 0 and its type."""

    tensors: tuple[str, ...]
    index: int
    op: str

    @property
    def tensor(self) -> str:
        """The name the operator goes by: its (first) output tensor's."""
        return self.tensors[0]
