"""A model reduced to some of its operators, to run them alone on LiteRT (one host operator,
one operator of the reference kernels, the part of a model an output depends on)."""

from __future__ import annotations

from collections.abc import Sequence

import flatbuffers
from ai_edge_litert import schema_py_generated as schema


def reduced_model(
    tree: schema.ModelT,
    operators: Sequence[int],
    inputs: Sequence[int],
    outputs: Sequence[int],
    description: bytes | None = None,
) -> bytes:
    """The flatbuffer of `tree` with subgraph 0 running only `operators` (indices, in their
    order) from graph inputs `inputs` to outputs `outputs`: tensors, buffers and options as
    they are, signature definitions dropped (they name the whole model's I/O), `description`
    set when given. `tree` itself is left as it was."""
    sub = tree.subgraphs[0]
    saved = (sub.operators, sub.inputs, sub.outputs, tree.signatureDefs, tree.description)
    sub.operators = [sub.operators[i] for i in operators]
    sub.inputs, sub.outputs = [int(t) for t in inputs], [int(t) for t in outputs]
    tree.signatureDefs = []
    if description is not None:
        tree.description = description
    try:
        builder = flatbuffers.Builder(1024)
        builder.Finish(tree.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())
    finally:
        sub.operators, sub.inputs, sub.outputs, tree.signatureDefs, tree.description = saved
