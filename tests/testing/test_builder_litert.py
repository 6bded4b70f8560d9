"""Built models run in ai-edge-litert and compute what their float reference says they should."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from cascader.testing.networks import CATALOGUE, COMPOSITIONS

_SAMPLES = 4
# Deep graphs accumulate one rounding per layer; single ops must agree to one output step.
_MULTI_OP_CASES = {*COMPOSITIONS, "mobilenet_like"}


def _run_int8(case: str, built: Callable) -> tuple[list[np.ndarray], list[np.ndarray], list]:
    """Quantised litert outputs and the float reference (in output steps) for random inputs."""
    c = built(case)
    interpreter = Interpreter(model_content=c.flatbuffer)
    interpreter.allocate_tensors()
    in_details = interpreter.get_input_details()
    out_details = interpreter.get_output_details()
    rng = np.random.default_rng(1234)
    feeds = []
    for t, d in zip(c.builder.inputs, in_details, strict=True):
        assert tuple(d["shape"]) == t.shape and d["dtype"] == np.int8
        scale, zp = d["quantization"]
        low, high = c.builder.input_range(t)
        real = rng.uniform(low, high, (_SAMPLES, *t.shape[1:]))
        feeds.append(np.clip(np.round(real / scale) + zp, -128, 127).astype(np.int8))
    got: list[list[np.ndarray]] = [[] for _ in out_details]
    for s in range(_SAMPLES):
        for d, f in zip(in_details, feeds, strict=True):
            interpreter.set_tensor(d["index"], f[s : s + 1])
        interpreter.invoke()
        for k, d in enumerate(out_details):
            got[k].append(interpreter.get_tensor(d["index"]))
    dequantized = [
        (f.astype(np.float64) - d["quantization"][1]) * d["quantization"][0]
        for f, d in zip(feeds, in_details, strict=True)
    ]
    reference = c.builder.evaluate(dequantized)
    expected = []
    for ref, d in zip(reference, out_details, strict=True):
        scale, zp = d["quantization"]
        expected.append(np.clip(np.round(ref / scale) + zp, -128, 127))
    return [np.concatenate(g) for g in got], expected, out_details


@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_runs_in_litert_and_matches_float_reference(case: str, built: Callable) -> None:
    got, expected, details = _run_int8(case, built)
    for g, e, d, t in zip(got, expected, details, built(case).builder.outputs, strict=True):
        assert g.dtype == np.int8 and g.shape == (_SAMPLES, *t.shape[1:])
        assert tuple(d["shape"]) == t.shape
        diff = np.abs(g.astype(np.int64) - e)
        assert g.std() > 4, "output collapsed to (nearly) a constant"
        if case in _MULTI_OP_CASES:
            assert np.corrcoef(g.ravel(), e.ravel())[0, 1] > 0.99
            assert diff.mean() < 1.5
        else:
            assert diff.max() <= 1
