"""A fully NPU model legalized once and run on the integer reference, as often as needed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cascader.frontend.passes import model_npu_functions
from cascader.frontend.tflite_check import parse_tflite
from cascader.ir.npu_ops import NpuFunction
from cascader.reference.run import ReferenceError, run_function


@dataclass(frozen=True)
class ModelReference:
    """A fully NPU model, legalized once, run as often as needed
    (`cascader.verify.hybrid.HybridModel` runs any model, host operators on litert)."""

    function: NpuFunction
    output_shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def from_model(cls, model: bytes, name: str = "model") -> ModelReference:
        functions = model_npu_functions(model)
        graph = parse_tflite(model, name).Subgraphs(0)
        in_count, out_count = graph.InputsLength(), graph.OutputsLength()
        if len(functions) != 1 or len(functions[0].inputs) != in_count:
            raise ReferenceError(
                f"{name}: {len(functions)} NPU functions; ModelReference runs models entirely "
                "on the NPU, HybridModel the others"
            )
        if len(functions[0].outputs) != out_count:
            raise ReferenceError(f"{name}: some outputs are not computed on the NPU")
        shapes = tuple(
            tuple(int(d) for d in graph.Tensors(graph.Outputs(i)).ShapeAsNumpy())
            for i in range(out_count)
        )
        return cls(functions[0], shapes)

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        outputs = run_function(self.function, inputs)
        return [o.reshape(s) for o, s in zip(outputs, self.output_shapes, strict=True)]


def run_reference(model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of a fully NPU model for one set of int8 inputs (in the model's input
    order); `cascader.verify.hybrid.run_model` runs any model."""
    return ModelReference.from_model(model)(inputs)
