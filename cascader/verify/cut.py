"""A model cut where its outputs vary with its input, so that comparing it proves something.

With random inputs (and random weights), many networks give the same output for every
input: a 1000-class softmax at its floor, logits saturated at one end. A compiled model with a
wrong weight or register then still equals the reference there. Cutting the model at its last
tensor whose values vary from sample to sample and take many distinct values makes a
difference visible again; the operators that tensor does not depend on are dropped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from cascader.verify.litert import KERNELS, MIN_DISTINCT, random_inputs, spread, telling
from cascader.verify.submodel import reduced_model

CUT_DESCRIPTION = b"cascader-dse cut"  # the description of every model `cut_at` writes
_INT_TYPES = (schema.TensorType.INT8, schema.TensorType.INT16, schema.TensorType.UINT8)


@dataclass(frozen=True)
class Variation:
    """How a tensor's values behave over the samples."""

    distinct: int  # distinct values over every element and sample
    varying: float  # share of its elements not the same in every sample

    def telling(self, min_distinct: int = MIN_DISTINCT) -> bool:
        return telling(self.distinct, self.varying, min_distinct)


def variations(model: bytes, samples: int = 8, seed: int = 0) -> dict[int, Variation]:
    """Per integer activation tensor of subgraph 0 (the inputs and every operator output),
    its variation over `samples` random inputs on LiteRT's built-in kernels."""
    interpreter = Interpreter(
        model_content=model,
        experimental_op_resolver_type=KERNELS["builtin"],
        experimental_preserve_all_tensors=True,
    )
    interpreter.allocate_tensors()
    tree = schema.ModelT.InitFromPackedBuf(model, 0)
    sub = tree.subgraphs[0]
    wanted = [
        int(t)
        for op in sub.operators
        for t in op.outputs
        if t >= 0 and sub.tensors[t].type in _INT_TYPES
    ]
    rng = np.random.default_rng(seed)
    values: dict[int, list[np.ndarray]] = {t: [] for t in wanted}
    for _ in range(samples):
        for detail, value in zip(
            interpreter.get_input_details(), random_inputs(model, rng), strict=True
        ):
            interpreter.set_tensor(detail["index"], value)
        interpreter.invoke()
        for t in wanted:
            values[t].append(np.array(interpreter.get_tensor(t)))
    return {t: Variation(*spread(seen)) for t, seen in values.items()}


def cut_at(model: bytes, outputs: Sequence[int]) -> bytes:
    """The model computing only `outputs` (tensor indices of subgraph 0) from the graph inputs
    they depend on: the other operators dropped, tensors and buffers as they were, described
    as `CUT_DESCRIPTION`."""
    tree = schema.ModelT.InitFromPackedBuf(model, 0)
    sub = tree.subgraphs[0]
    producer = {int(t): i for i, op in enumerate(sub.operators) for t in op.outputs}
    needed: set[int] = set()
    pending = [producer[t] for t in outputs if t in producer]
    while pending:
        index = pending.pop()
        if index in needed:
            continue
        needed.add(index)
        pending += [producer[int(t)] for t in sub.operators[index].inputs if int(t) in producer]
    reached = {int(t) for i in needed for t in sub.operators[i].inputs}
    inputs = [t for t in sub.inputs if int(t) in reached or int(t) in outputs]
    return reduced_model(tree, sorted(needed), inputs, outputs, CUT_DESCRIPTION)


def cut_where_varying(
    model: bytes, samples: int = 8, seed: int = 0, min_distinct: int = MIN_DISTINCT
) -> tuple[bytes, dict[int, Variation]]:
    """The model itself when each of its outputs is telling (varies over the samples and takes
    at least `min_distinct` values); else the model cut at its last telling tensor, the one
    produced by the latest operator. Returns (model, the variation of each tensor it
    outputs). Raises ValueError when no tensor of the model is telling."""
    found = variations(model, samples, seed)
    sub = schema.ModelT.InitFromPackedBuf(model, 0).subgraphs[0]
    outputs = [int(t) for t in sub.outputs]
    if all(t in found and found[t].telling(min_distinct) for t in outputs):
        return model, {t: found[t] for t in outputs}
    order = [int(t) for op in sub.operators for t in op.outputs if t >= 0]
    candidates = [t for t in order if t in found and found[t].telling(min_distinct)]
    if not candidates:
        raise ValueError(
            f"no tensor of the model takes {min_distinct} or more values that vary over "
            f"{samples} random inputs"
        )
    last = candidates[-1]
    return cut_at(model, [last]), {last: found[last]}
