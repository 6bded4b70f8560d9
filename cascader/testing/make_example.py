"""Write the example model: `python -m cascader.testing.make_example examples/<name>.tflite`.

Prints the model's op mix, MACs and sizes (the numbers quoted in examples/README.md).
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tflite

from cascader.testing.networks import mobilenet_like

_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_ITEM_BYTES = {tflite.TensorType.INT8: 1, tflite.TensorType.INT32: 4}


@dataclass(frozen=True)
class ModelSummary:
    """What a TFLite file holds: ops by kind, MACs of the MAC ops, constant and activation bytes."""

    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    op_counts: dict[str, int]
    macs: int
    constant_bytes: int
    largest_activation_bytes: int
    file_bytes: int

    @property
    def ops(self) -> int:
        return sum(self.op_counts.values())

    def lines(self) -> list[str]:
        mix = ", ".join(f"{kind} x{n}" for kind, n in self.op_counts.items())
        return [
            f"input {list(self.input_shape)} int8, output {list(self.output_shape)} int8",
            f"{self.ops} ops: {mix}",
            f"MACs: {self.macs:,}",
            f"constant data: {self.constant_bytes:,} bytes",
            f"largest activation: {self.largest_activation_bytes:,} bytes",
            f"file: {self.file_bytes:,} bytes",
        ]


def _macs(kind: str, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> int:
    if kind in ("CONV_2D", "TRANSPOSE_CONV"):
        weights = shapes[1]
        spatial = out if kind == "CONV_2D" else shapes[2]
        return math.prod(spatial[1:3]) * math.prod(weights)
    if kind == "DEPTHWISE_CONV_2D":
        return math.prod(out[1:3]) * math.prod(shapes[1])
    if kind == "FULLY_CONNECTED":
        return math.prod(shapes[1])
    return 0


def describe(flatbuffer: bytes) -> ModelSummary:
    model = tflite.Model.GetRootAsModel(flatbuffer, 0)
    graph = model.Subgraphs(0)

    def shape(i: int) -> tuple[int, ...]:
        return tuple(int(d) for d in graph.Tensors(i).ShapeAsNumpy())

    counts: Counter[str] = Counter()
    macs = 0
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        kind = _NAMES[model.OperatorCodes(op.OpcodeIndex()).BuiltinCode()]
        counts[kind] += 1
        ins = [shape(int(t)) if t >= 0 else () for t in op.InputsAsNumpy()]
        macs += _macs(kind, ins, shape(int(op.Outputs(0))))
    constant = activation = 0
    for i in range(graph.TensorsLength()):
        t = graph.Tensors(i)
        size = int(np.prod(t.ShapeAsNumpy())) * _ITEM_BYTES.get(t.Type(), 1)
        if model.Buffers(t.Buffer()).DataLength():
            constant += size
        else:
            activation = max(activation, size)
    return ModelSummary(
        shape(graph.Inputs(0)),
        shape(graph.Outputs(0)),
        dict(counts),
        macs,
        constant,
        activation,
        len(flatbuffer),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="path of the .tflite file to write")
    parser.add_argument("--size", type=int, default=96, help="input height and width")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    flatbuffer = mobilenet_like((args.size, args.size, 3), seed=args.seed).build()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(flatbuffer)
    print(f"wrote {args.output}")
    for line in describe(flatbuffer).lines():
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
