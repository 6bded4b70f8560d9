"""LiteRT's reference kernels (BUILTIN_REF) on a model, in a child process.

They are the arithmetic the NPU implements (its TFL rounding is theirs), so a model the NPU
runs whole is checked against them bit for bit. Their int8 SOFTMAX aborts the process in two
cases, both on classifiers:
- while the model is prepared, when beta x input scale x 2^26 is at most 1
  (`PreprocessSoftmaxScaling` asks for a multiplier above one): logits of a tiny scale, as the
  shared VWW (7.8e-9) and MobileNetV2 models have;
- while it runs, when the exponentials of a row sum to 2^8 or more (their reciprocal is then
  shifted by more than 31 bits, which gemmlowp asserts against): hundreds of logits within a
  few steps of the largest, as a 1000-class classifier with random weights gives.
Such a model runs operator by operator instead: each operator alone on the reference kernels,
fed what the operators before it computed, and a SOFTMAX the kernel would abort on in float64,
rounded to its output's quantisation (in both cases every probability is far below one step
from its float value's rounding). The kernels run in a child that may die, which imports only
numpy and ai-edge-litert, starts in a fraction of a second and touches nothing of the
caller's.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from cascader.verify.submodel import reduced_model

_SOFTMAX_SCALED_BITS = 26  # 31 minus the 5 integer bits of the kernel's scaled differences
_SOFTMAX_MAX_SUM = 2.0**8  # a row's sum of exponentials from which the kernel aborts


def reference_kernel_outputs(
    model: bytes, samples: Sequence[Sequence[np.ndarray]]
) -> list[list[np.ndarray]] | None:
    """Per sample (inputs in model input order), the model's outputs from LiteRT's reference
    kernels (operator by operator where a SOFTMAX of it refuses them, see above); None when
    they fail or abort the child on any sample."""
    found = run_reference_kernels(model, samples, by_operator=False)
    return found if found is not None else run_reference_kernels(model, samples, by_operator=True)


def run_reference_kernels(
    model: bytes, samples: Sequence[Sequence[np.ndarray]], by_operator: bool
) -> list[list[np.ndarray]] | None:
    """The reference kernels in a child, on the whole model or `by_operator`; None when the
    child fails or dies."""
    with tempfile.TemporaryDirectory(prefix="dse-litert-") as work:
        request, reply = Path(work) / "request.pickle", Path(work) / "reply.pickle"
        request.write_bytes(pickle.dumps((model, [list(s) for s in samples], by_operator)))
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(request), str(reply)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0 or not reply.is_file():
            return None
        return pickle.loads(reply.read_bytes())


def refused_softmaxes(tree: schema.ModelT) -> set[int]:
    """The SOFTMAX operators of subgraph 0 whose reference kernel aborts while preparing."""
    sub = tree.subgraphs[0]
    refused = set()
    for index, op in enumerate(sub.operators):
        if not _is_softmax(tree, op):
            continue
        q = sub.tensors[op.inputs[0]].quantization
        beta = op.builtinOptions.beta if op.builtinOptions is not None else 1.0
        scaled = q is not None and q.scale is not None and len(q.scale) > 0
        if scaled and beta * float(q.scale[0]) * 2.0**_SOFTMAX_SCALED_BITS <= 1.0:
            refused.add(index)
    return refused


def _is_softmax(tree: schema.ModelT, op: schema.OperatorT) -> bool:
    code = tree.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.SOFTMAX


def _interpreter(model: bytes):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(
        model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF
    )
    interpreter.allocate_tensors()
    return interpreter


def _invoke(interpreter, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    for detail, value in zip(interpreter.get_input_details(), inputs, strict=True):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def _exponentials(tree: schema.ModelT, op: schema.OperatorT, logits: np.ndarray) -> np.ndarray:
    """exp(beta x (logit - the row's largest)) of a SOFTMAX, in float64."""
    q_in = tree.subgraphs[0].tensors[op.inputs[0]].quantization
    beta = op.builtinOptions.beta if op.builtinOptions is not None else 1.0
    real = beta * float(q_in.scale[0]) * logits.astype(np.float64)
    return np.exp(real - real.max(axis=-1, keepdims=True))


def _float_softmax(tree: schema.ModelT, op: schema.OperatorT, logits: np.ndarray) -> np.ndarray:
    """SOFTMAX in float64 over the last axis, quantised as its output."""
    q_out = tree.subgraphs[0].tensors[op.outputs[0]].quantization
    exps = _exponentials(tree, op, logits)
    probabilities = exps / exps.sum(axis=-1, keepdims=True)
    scaled = probabilities / float(q_out.scale[0])
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + int(q_out.zeroPoint[0])
    info = np.iinfo(logits.dtype)
    return np.clip(rounded, info.min, info.max).astype(logits.dtype)


def _by_operator(model: bytes, samples: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """The model run operator by operator, a SOFTMAX the kernel would abort on in float64."""
    tree = schema.ModelT.InitFromPackedBuf(model, 0)
    sub = tree.subgraphs[0]
    refused = refused_softmaxes(tree)

    def aborts(op: schema.OperatorT, values: list[np.ndarray]) -> bool:
        if not _is_softmax(tree, op):
            return False
        return bool((_exponentials(tree, op, values[0]).sum(axis=-1) >= _SOFTMAX_MAX_SUM).any())

    def constant(t: int) -> bool:
        data = tree.buffers[sub.tensors[t].buffer].data
        return data is not None and len(data) > 0

    steps = []
    for index, op in enumerate(sub.operators):
        reads = [int(t) for t in op.inputs if t >= 0 and not constant(int(t))]
        alone = None if index in refused else reduced_model(tree, [index], reads, op.outputs)
        run = None if alone is None else _interpreter(alone)
        steps.append((op, reads, run))
    outputs = []
    for inputs in samples:
        values = {int(t): np.asarray(v) for t, v in zip(sub.inputs, inputs, strict=True)}
        for op, reads, run in steps:
            if run is None or aborts(op, [values[t] for t in reads]):
                computed = [_float_softmax(tree, op, values[reads[0]])]
            else:
                computed = _invoke(run, [values[t] for t in reads])
            values.update(zip((int(t) for t in op.outputs), computed, strict=True))
        outputs.append([values[int(t)] for t in sub.outputs])
    return outputs


def _run(request: Path, reply: Path) -> None:
    model, samples, by_operator = pickle.loads(request.read_bytes())
    if by_operator or refused_softmaxes(schema.ModelT.InitFromPackedBuf(model, 0)):
        outputs = _by_operator(model, samples)
    else:
        interpreter = _interpreter(model)
        outputs = [_invoke(interpreter, inputs) for inputs in samples]
    reply.write_bytes(pickle.dumps(outputs))


if __name__ == "__main__":
    _run(Path(sys.argv[1]), Path(sys.argv[2]))
