"""The original model through ai-edge-litert, and how far the integer reference is from it.

TFLite ships two int8 kernel sets: the reference kernels (BUILTIN_REF, the definition Vela's
arithmetic is written against) and the optimised built-ins (what an interpreter runs without
the XNNPACK delegate, whose float requantisation differs from both). Their rounding differs in
places (the reference FULLY_CONNECTED rounds once, the optimised MEAN and TRANSPOSE_CONV round
differently), and the reference set aborts the process on some classifiers' SOFTMAX, so the
caller chooses; `reference_kernels` runs them in a child process (operator by operator around
such a SOFTMAX), which `verify_point` and `dse simulate` do for every model the NPU runs whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from cascader.verify.model_reference import ModelReference

MIN_DISTINCT = 16  # distinct values an output needs for a zero difference to mean much
KERNELS = {
    "reference": OpResolverType.BUILTIN_REF,
    "builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
}


def _interpreter(model: bytes, kernels: str) -> Interpreter:
    if kernels not in KERNELS:
        raise ValueError(f"unknown litert kernels {kernels!r}; expected one of {sorted(KERNELS)}")
    interpreter = Interpreter(model_content=model, experimental_op_resolver_type=KERNELS[kernels])
    interpreter.allocate_tensors()
    return interpreter


def litert_outputs(
    model: bytes, inputs: Sequence[np.ndarray], kernels: str = "builtin"
) -> list[np.ndarray]:
    """The model's outputs for one set of inputs (model input order), from ai-edge-litert."""
    interpreter = _interpreter(model, kernels)
    for detail, value in zip(interpreter.get_input_details(), inputs, strict=True):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def random_inputs(model: bytes, rng: np.random.Generator) -> list[np.ndarray]:
    """Uniform random values over each input's whole integer range."""
    inputs = []
    for detail in _interpreter(model, "builtin").get_input_details():
        info = np.iinfo(detail["dtype"])
        inputs.append(rng.integers(info.min, info.max + 1, detail["shape"], detail["dtype"]))
    return inputs


def telling(distinct: int, varying: float, min_distinct: int = MIN_DISTINCT) -> bool:
    """Whether values that take `distinct` values, `varying` of them not the same in every
    sample, are worth comparing: then a wrong weight or register shows as a difference."""
    return distinct >= min_distinct and varying > 0.0


def spread(samples: Sequence[np.ndarray]) -> tuple[int, float]:
    """Of one tensor's values in each sample: how many distinct values it takes over them
    all, and the share of its elements that are not the same in every sample."""
    stacked = np.stack([np.asarray(values).ravel() for values in samples])
    varying = float(np.mean((stacked != stacked[0]).any(axis=0))) if stacked.size else 0.0
    return int(np.unique(stacked).size), varying


@dataclass(frozen=True)
class DiffStats:
    """|a - b| over every element of one output across all samples, and how much the values
    compared against (`b`) say: a difference of 0 on an output that is the same for every
    input (a saturated classifier, say) proves little, since a wrong weight often leaves it
    unchanged."""

    output: int
    elements: int
    max_abs_diff: int
    exact: float  # share of elements equal
    off_by_one: float
    more: float
    distinct: int = 0  # distinct values of b over every element and sample
    varying: float = 0.0  # share of b's elements not the same in every sample

    @property
    def telling(self) -> bool:
        return telling(self.distinct, self.varying)

    def to_json(self) -> dict:
        return asdict(self)


def diff_stats(output: int, a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> DiffStats:
    diff = np.concatenate(
        [np.abs(x.astype(np.int64) - y.astype(np.int64)).ravel() for x, y in zip(a, b, strict=True)]
    )
    distinct, varying = spread(b)
    return DiffStats(
        output=output,
        elements=int(diff.size),
        max_abs_diff=int(diff.max(initial=0)),
        exact=float(np.mean(diff == 0)),
        off_by_one=float(np.mean(diff == 1)),
        more=float(np.mean(diff > 1)),
        distinct=distinct,
        varying=varying,
    )


def compare_with_litert(
    model: bytes,
    samples: int = 2,
    seed: int = 0,
    kernels: str = "builtin",
    name: str = "model",
    reference: ModelReference | None = None,
) -> list[DiffStats]:
    """Per model output: litert on the original model vs the reference of its legalized NPU
    functions (legalized here unless given), over `samples` random inputs."""
    reference = reference or ModelReference.from_model(model, name)
    rng = np.random.default_rng(seed)
    theirs: list[list[np.ndarray]] = []
    ours: list[list[np.ndarray]] = []
    for _ in range(samples):
        inputs = random_inputs(model, rng)
        theirs.append(litert_outputs(model, inputs, kernels))
        ours.append(reference(inputs))
    return [
        diff_stats(k, [t[k] for t in theirs], [o[k] for o in ours]) for k in range(len(ours[0]))
    ]
