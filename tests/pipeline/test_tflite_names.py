"""Per-op results carry the model's own names, as Vela's per-layer report does: every op of an
estimate (`dse estimate --json` `ops[]`) names the output tensor of the TFLite operator it
stands for, with that operator's index and type; the ops of a decomposed operator (softmax)
all carry their operator's."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_cases import MODEL_NAMES, model_path
from sessions import estimate

from cascader.core.options import CascaderOptions
from cascader.frontend.tflite_check import builtin_name, parse_tflite
from cascader.frontend.tflite_import import load_tflite
from dse.space import SMALLEST

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
# The point tests/schedule/test_floor.py scores on mobilenet_v2_100_224: the session keeps it.
POOL, REGION = 256 * 1024, 4 << 20


def _operators(model: bytes) -> list[tuple[str, tuple[str, ...]]]:
    """Subgraph 0's operators: (type, output tensor names), by index."""
    parsed = parse_tflite(model, "model")
    graph = parsed.Subgraphs(0)
    found = []
    for index in range(graph.OperatorsLength()):
        op = graph.Operators(index)
        outputs = tuple(graph.Tensors(t).Name().decode() for t in op.OutputsAsNumpy())
        found.append((builtin_name(parsed, op), outputs))
    return found


@pytest.mark.parametrize("name", ("example", *MODEL_NAMES))
def test_every_op_names_its_tflite_operator_and_output_tensor(name: str) -> None:
    model = load_tflite(EXAMPLE if name == "example" else model_path(name))
    options = CascaderOptions(**SMALLEST.cascader_options())
    ops = estimate(model, *U55, POOL, options, None, proposal_region_bytes=REGION).to_json()["ops"]
    operators = _operators(model)
    assert ops
    for op in ops:
        kind, outputs = operators[op["tflite_index"]]
        assert op["tflite_op"] == kind and op["name"] in outputs, op
    # Every operator the NPU runs is named once per op in model order.
    indices = [op["tflite_index"] for op in ops]
    assert indices == sorted(indices)
