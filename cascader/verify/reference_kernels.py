"""LiteRT's reference kernels (BUILTIN_REF) on a model, in a child process.

They are the arithmetic the NPU implements (its TFL rounding is theirs), so a model the NPU
runs whole is checked against them bit for bit; but they abort the process on some models
(in allocate_tensors on the shared VWW and MobileNetV2 models, in invoke on SOFTMAX over
equal values, as an EfficientNet-like network with random weights gives), so they run in a
child that may die. The child imports only numpy and ai-edge-litert: it starts in a fraction
of a second, and nothing it does touches the caller's state.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def reference_kernel_outputs(
    model: bytes, samples: Sequence[Sequence[np.ndarray]]
) -> list[list[np.ndarray]] | None:
    """Per sample (inputs in model input order), the model's outputs from LiteRT's reference
    kernels; None when they fail or abort the child on any sample."""
    with tempfile.TemporaryDirectory(prefix="dse-litert-") as work:
        request, reply = Path(work) / "request.pickle", Path(work) / "reply.pickle"
        request.write_bytes(pickle.dumps((model, [list(s) for s in samples])))
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(request), str(reply)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0 or not reply.is_file():
            return None
        return pickle.loads(reply.read_bytes())


def _run(request: Path, reply: Path) -> None:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    model, samples = pickle.loads(request.read_bytes())
    interpreter = Interpreter(
        model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF
    )
    interpreter.allocate_tensors()
    outputs = []
    for inputs in samples:
        for detail, value in zip(interpreter.get_input_details(), inputs, strict=True):
            interpreter.set_tensor(detail["index"], value)
        interpreter.invoke()
        outputs.append(
            [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]
        )
    reply.write_bytes(pickle.dumps(outputs))


if __name__ == "__main__":
    _run(Path(sys.argv[1]), Path(sys.argv[2]))
