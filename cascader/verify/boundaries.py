"""Which TFLite operators and tensors each NPU function of a model stands for.

The flow names an NPU function's inputs and outputs after Relax variables, which keep no TFLite
tensor names (apart from graph inputs). So each boundary is matched to the TFLite tensors with
its element type, element count and quantisation; the TFLite operators an NPU function covers
are those between its input and output tensors. Where several tensors match (reshape chains,
a split's outputs, a pooling that keeps its input's quantisation), only choices with which the
function reaches no graph input it does not read and no operator another function computes
remain; if several do, one litert run with every tensor kept decides: the reference, fed
litert's values of a choice's inputs, must reproduce litert's values of its outputs (within
rounding; a wrong tensor is far off). A boundary nothing fits raises a ReferenceError."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from cascader.ir.npu_ops import NpuFunction, NpuTensor, feature_inputs
from cascader.reference.run import ReferenceError, run_function
from cascader.verify.litert import KERNELS, random_inputs
from cascader.verify.submodel import reduced_model

_DTYPES = {
    schema.TensorType.INT8: "int8",
    schema.TensorType.UINT8: "uint8",
    schema.TensorType.INT16: "int16",
    schema.TensorType.INT32: "int32",
}


@dataclass(frozen=True)
class NpuStep:
    """One NPU function, with the TFLite tensors it reads and writes (its own order)."""

    index: int
    function: NpuFunction
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: frozenset[int]  # the TFLite operators it computes


def _function_tensors(function: NpuFunction) -> dict[str, NpuTensor]:
    """The NpuTensor each input and output name of the function is read or written as."""
    found: dict[str, NpuTensor] = {}
    for op in function.ops:
        for tensor in feature_inputs(op):
            if tensor.name in function.inputs:
                found.setdefault(tensor.name, tensor)
        if op.ofm.name in function.outputs:
            found[op.ofm.name] = op.ofm
    return found


class TfliteGraph:
    """Subgraph 0 of the model (object API): tensors by id, the operator producing each,
    operator names."""

    def __init__(self, model: schema.ModelT) -> None:
        self.model = model
        self.subgraph = model.subgraphs[0]
        self.tensors = self.subgraph.tensors
        self.producer: dict[int, int] = {}
        for index, op in enumerate(self.subgraph.operators):
            for t in op.outputs:
                self.producer[int(t)] = index
        codes = model.operatorCodes
        names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
        self.op_names = [
            names.get(
                max(codes[op.opcodeIndex].builtinCode, codes[op.opcodeIndex].deprecatedBuiltinCode),
                "?",
            )
            for op in self.subgraph.operators
        ]

    def sub_model(self, op: int, inputs: Sequence[int], outputs: Sequence[int]) -> bytes:
        """The flatbuffer reduced to one operator with the given graph inputs/outputs (same
        tensors, buffers and options), to run that operator alone on LiteRT."""
        return reduced_model(self.model, [op], inputs, outputs)

    def is_constant(self, tid: int) -> bool:
        data = self.model.buffers[self.tensors[tid].buffer].data
        return data is not None and len(data) > 0

    def name(self, tid: int) -> str:
        return self.tensors[tid].name.decode()

    def shape(self, tid: int) -> tuple[int, ...]:
        return tuple(int(d) for d in self.tensors[tid].shape)

    def output_position(self, tid: int) -> int:
        op = self.producer.get(tid)
        return -1 if op is None else list(self.subgraph.operators[op].outputs).index(tid)

    def op_inputs(self, op: int) -> list[int]:
        return [int(t) for t in self.subgraph.operators[op].inputs if t >= 0]

    def matches(self, tid: int, tensor: NpuTensor) -> bool:
        t = self.tensors[tid]
        if _DTYPES.get(t.type) != tensor.dtype or self.is_constant(tid):
            return False
        if int(np.prod(self.shape(tid))) != int(np.prod(tensor.shape)):
            return False
        q = t.quantization
        if q is None or q.scale is None or len(q.scale) != 1:
            return False
        if np.isnan(tensor.quant.scale):  # an int8 copy the flow left unquantised
            return True
        same_scale = np.float32(q.scale[0]) == np.float32(tensor.quant.scale)
        return bool(same_scale and int(q.zeroPoint[0]) == tensor.quant.zero_point)


def _covered(
    graph: TfliteGraph, inputs: Sequence[int], outputs: Sequence[int], name: str
) -> set[int]:
    """The operators between a function's input and output tensors."""
    stop = set(inputs)
    ops: set[int] = set()
    todo = [t for t in outputs if t not in stop]
    while todo:
        tid = todo.pop()
        op = graph.producer.get(tid)
        if op is None:
            if graph.is_constant(tid):
                continue
            raise ReferenceError(f"{name}: reaches graph input {graph.name(tid)} it does not read")
        if op in ops:
            continue
        ops.add(op)
        todo.extend(t for t in graph.op_inputs(op) if t not in stop and not graph.is_constant(t))
    return ops


def _candidates(graph: TfliteGraph, tensor: NpuTensor, named: dict[str, int]) -> list[int]:
    """The TFLite tensors an NPU function input or output may be, earliest producer first
    and, for one operator's outputs (a split), in its output order. A graph input is found by
    name, the only name the flow keeps."""
    if tensor.name in named:
        return [named[tensor.name]]
    found = [tid for tid in range(len(graph.tensors)) if graph.matches(tid, tensor)]
    if not found:
        raise ReferenceError(f"no TFLite tensor is the NPU tensor {tensor.name} {tensor.shape}")
    return sorted(found, key=lambda t: (graph.producer.get(t, -1), graph.output_position(t)))


_MAX_CHOICES = 256


Boundaries = tuple[tuple[int, ...], tuple[int, ...], frozenset[int]]


def _boundaries(
    graph: TfliteGraph,
    inputs: list[list[int]],
    outputs: list[list[int]],
    taken: Mapping[int, str],
    name: str,
) -> list[Boundaries]:
    """Every (inputs, outputs, operators) choice, one candidate per boundary, earliest first,
    with which the function computes every output and reaches no graph input it does not
    read and no operator a function before it computes (a wrong input lets the walk run past
    the real one into what feeds it)."""
    found: list[Boundaries] = []
    choices = itertools.product(itertools.product(*outputs), itertools.product(*inputs))
    for outs, ins in itertools.islice(choices, _MAX_CHOICES):
        if len(set(outs)) < len(outs) or len(set(ins)) < len(ins) or set(ins) & set(outs):
            continue
        try:
            ops = _covered(graph, ins, outs, name)
        except ReferenceError:
            continue
        if not ops & taken.keys() and all(graph.producer.get(t) in ops for t in outs):
            found.append((tuple(ins), tuple(outs), frozenset(ops)))
    if not found:
        raise ReferenceError(f"{name}: no TFLite tensors fit its inputs and outputs")
    return found


def _probe(model: bytes, kernels: str) -> Callable[[int], np.ndarray]:
    """Every tensor of one litert run of the whole model on random inputs (seed 0)."""
    interpreter = Interpreter(
        model_content=model,
        experimental_op_resolver_type=KERNELS[kernels],
        experimental_preserve_all_tensors=True,
    )
    interpreter.allocate_tensors()
    values = random_inputs(model, np.random.default_rng(0))
    for detail, value in zip(interpreter.get_input_details(), values, strict=True):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return interpreter.get_tensor


def _closest(
    function: NpuFunction, choices: list[Boundaries], tensor: Callable[[int], np.ndarray]
) -> Boundaries:
    """The choice whose outputs, computed by the reference from litert's values of its
    inputs, are nearest litert's values of them (the first of equals: reshape chains)."""

    def distance(choice: Boundaries) -> int:
        ins, outs, _ = choice
        ours = run_function(function, [tensor(t) for t in ins])
        return max(
            int(np.abs(o.astype(np.int64).ravel() - tensor(t).astype(np.int64).ravel()).max())
            for o, t in zip(ours, outs, strict=True)
        )

    return min(choices, key=distance)


def npu_steps(
    model: bytes, graph: TfliteGraph, functions: Sequence[NpuFunction], kernels: str = "builtin"
) -> list[NpuStep]:
    """Each NPU function with the TFLite tensors it reads and writes and the operators it
    computes, in function order."""
    named = {graph.name(int(t)): int(t) for t in graph.subgraph.inputs}
    steps: list[NpuStep] = []
    taken: dict[int, str] = {}
    probe: Callable[[int], np.ndarray] | None = None
    for index, function in enumerate(functions):
        tensors = _function_tensors(function)
        choices = _boundaries(
            graph,
            [_candidates(graph, tensors[n], named) for n in function.inputs],
            [_candidates(graph, tensors[n], named) for n in function.outputs],
            taken,
            function.name,
        )
        if len(choices) > 1:
            probe = probe or _probe(model, kernels)
            choices = [_closest(function, choices, probe)]
        ins, outs, ops = choices[0]
        taken.update(dict.fromkeys(ops, function.name))
        steps.append(NpuStep(index, function, ins, outs, ops))
    return steps
