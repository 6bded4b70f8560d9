"""Run a whole model, host ops and all: every NPU function through our integer reference (or
a stripe schedule), every operator left on the host through ai-edge-litert, so the model's
outputs depend on what the NPU side computed. Which TFLite operators each NPU function stands
for comes from `boundaries`; every other operator runs on the host, each as a one-operator
sub-model of the original flatbuffer (same tensors, buffers and options; only the operator
list and the graph inputs/outputs differ).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from cascader.frontend.passes import model_npu_functions
from cascader.ir.npu_ops import NpuFunction
from cascader.reference.run import ReferenceError, run_function
from cascader.verify.boundaries import NpuStep, TfliteGraph, npu_steps
from cascader.verify.litert import KERNELS

# Runs NPU function `index` on its inputs (function input order), returns its outputs.
NpuRunner = Callable[[int, NpuFunction, list[np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class HostStep:
    """One TFLite operator run by litert as a sub-model of one operator."""

    operator: int
    name: str
    inputs: tuple[int, ...]  # non-constant tensors it reads, sub-model input order
    outputs: tuple[int, ...]
    interpreter: Interpreter


class HybridModel:
    """A TFLite model split into NPU functions and host operators, in an order that runs."""

    def __init__(
        self, model: bytes, functions: Sequence[NpuFunction], kernels: str = "builtin"
    ) -> None:
        graph = TfliteGraph(schema.ModelT.InitFromPackedBuf(model, 0))
        self.graph = graph
        steps: list[tuple[int, NpuStep | HostStep]] = []
        taken: set[int] = set()
        for step in npu_steps(model, graph, functions, kernels):
            taken |= step.operators
            steps.append((min(step.operators, default=-1), step))
        for op in range(len(graph.subgraph.operators)):
            if op in taken:
                continue
            ins = tuple(t for t in graph.op_inputs(op) if not graph.is_constant(t))
            outs = tuple(int(t) for t in graph.subgraph.operators[op].outputs)
            interpreter = Interpreter(
                model_content=graph.sub_model(op, ins, outs),
                experimental_op_resolver_type=KERNELS[kernels],
            )
            interpreter.allocate_tensors()
            steps.append((op, HostStep(op, graph.op_names[op], ins, outs, interpreter)))
        self.steps = _runnable_order(steps, {int(t) for t in graph.subgraph.inputs})
        self.inputs = tuple(int(t) for t in graph.subgraph.inputs)
        self.outputs = tuple(int(t) for t in graph.subgraph.outputs)

    @classmethod
    def from_model(cls, model: bytes, kernels: str = "builtin") -> HybridModel:
        return cls(model, model_npu_functions(model), kernels)

    @property
    def functions(self) -> tuple[NpuFunction, ...]:
        return tuple(s.function for s in self.steps if isinstance(s, NpuStep))

    @property
    def host_ops(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps if isinstance(s, HostStep))

    def output_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.graph.shape(t) for t in self.outputs)

    def run(self, inputs: Sequence[np.ndarray], npu: NpuRunner | None = None) -> list[np.ndarray]:
        """The model's outputs for inputs in its input order; NPU functions through `npu`
        (default: the unscheduled reference)."""
        if len(inputs) != len(self.inputs):
            raise ReferenceError(f"{len(inputs)} inputs given, {len(self.inputs)} expected")
        env = {t: np.asarray(v) for t, v in zip(self.inputs, inputs, strict=True)}
        for step in self.steps:
            values = [env[t].reshape(self.graph.shape(t)) for t in step.inputs]
            if isinstance(step, NpuStep):
                if npu is None:
                    results = run_function(step.function, values)
                else:
                    results = npu(step.index, step.function, values)
            else:
                results = _invoke(step, values)
            for tid, value in zip(step.outputs, results, strict=True):
                env[tid] = np.asarray(value).reshape(self.graph.shape(tid))
        return [env[t] for t in self.outputs]

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.run(inputs)


def _invoke(step: HostStep, values: Sequence[np.ndarray]) -> list[np.ndarray]:
    interpreter = step.interpreter
    for detail, value in zip(interpreter.get_input_details(), values, strict=True):
        interpreter.set_tensor(detail["index"], value.astype(detail["dtype"], copy=False))
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _runnable_order(
    steps: list[tuple[int, NpuStep | HostStep]], available: set[int]
) -> tuple[NpuStep | HostStep, ...]:
    """Each step once all it reads is available, earliest TFLite operator first."""
    pending = sorted(steps, key=lambda s: s[0])
    order: list[NpuStep | HostStep] = []
    while pending:
        for position, (_, step) in enumerate(pending):
            if all(t in available for t in step.inputs):
                order.append(step)
                available.update(step.outputs)
                del pending[position]
                break
        else:
            raise ReferenceError("the NPU functions and host operators form a cycle")
    return tuple(order)


def run_model(model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The whole model's outputs: NPU functions on the reference, host ops on litert."""
    return HybridModel.from_model(model)(inputs)
