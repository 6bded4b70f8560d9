"""Every op computed stripe by stripe, each stripe from only the input boxes `op_reads` names,
equals the op computed whole: what the striped executor relies on."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from reference_cases import legalized_case

from cascader.ir.boxes import Box
from cascader.ir.npu_ops import Identity, NpuFunction, NpuOp
from cascader.reference.run import op_reads, run_op, run_op_box
from cascader.testing.networks import CATALOGUE, single_op_model
from cascader.testing.shared import shared_dir
from cascader.verify.litert import random_inputs
from cascader.verify.model_reference import ModelReference

_CASES = sorted(set(CATALOGUE) - {"mobilenet_like"})


def _cuts(size: int, parts: int) -> list[tuple[int, int]]:
    """Uneven pieces, so stripes start at odd offsets (upscaled and strided reads)."""
    bounds = sorted({0, size, *(size * k // parts + k % 2 for k in range(1, parts))})
    bounds = [b for b in bounds if 0 <= b <= size]
    return [(a, b - a) for a, b in itertools.pairwise(bounds) if b > a]


def _stripes(region: Box) -> list[Box]:
    """A grid of boxes covering `region`: H in 3, W in 2, C in 2 (4-D), the last axis in 3."""
    parts = (1, 3, 2, 2) if len(region.shape) == 4 else (1,) * (len(region.shape) - 1) + (3,)
    axes = [
        [(region.start[a] + o, s) for o, s in _cuts(region.shape[a], p)]
        for a, p in enumerate(parts)
    ]
    return [
        Box(tuple(o for o, _ in combo), tuple(s for _, s in combo))
        for combo in itertools.product(*axes)
    ]


def _inputs(op: NpuOp, env: dict[str, np.ndarray]) -> list[np.ndarray | None]:
    tensors = [op.ifm, getattr(op, "ifm2", None)]
    return [
        None if t is None or t.name not in env else env[t.name].reshape(t.shape) for t in tensors
    ]


def _check_function(function: NpuFunction, inputs: list[np.ndarray]) -> int:
    env = dict(zip(function.inputs, inputs, strict=True))
    checked = 0
    for op in function.ops:
        sources = _inputs(op, env)
        whole = run_op(op, env).reshape(op.ofm.shape)
        region = Box.whole(op.ofm.shape)
        if isinstance(op, Identity) and op.operator != "RESHAPE" and op.ofm_fill is None:
            region = Box(op.ofm_offset or (0,) * len(op.ofm.shape), op.region or op.ofm.shape)
        for stripe in _stripes(region):
            reads = op_reads(op, stripe)
            boxes = []
            for box, source in zip(reads, sources, strict=False):
                if box is None:
                    boxes.append(None)
                    continue
                assert Box.whole(source.shape).contains(box), (op.name, stripe, box)
                boxes.append(source[box.slices()])
            got = run_op_box(op, boxes, stripe)
            np.testing.assert_array_equal(
                got, whole[stripe.slices()], err_msg=f"{op.name} {stripe}"
            )
            checked += 1
    return checked


@pytest.mark.parametrize("case", _CASES)
def test_stripes_equal_the_whole_op(case: str) -> None:
    built = legalized_case(case)
    inputs = random_inputs(built.model, np.random.default_rng(2))
    function = built.reference.function
    assert _check_function(function, inputs) > len(function.ops)


def test_stripes_of_a_mean_read_from_its_row_blocks() -> None:
    """MEAN over 80x80: the second partial sum reads IFM rows 51..79 whatever its stripe."""
    model = single_op_model("MEAN", shape=(1, 80, 80, 4), axes=(1, 2))
    reference = ModelReference.from_model(model)
    second = reference.function.ops[1]
    (read,) = op_reads(second, Box.whole(second.ofm.shape))
    assert read == Box((0, 51, 0, 0), (1, 29, 80, 4))
    inputs = random_inputs(model, np.random.default_rng(4))
    assert _check_function(reference.function, inputs) > len(reference.function.ops)


@pytest.mark.parametrize("name", ["kws_dscnn", "ic_resnet8"])
def test_stripes_of_shared_models(name: str) -> None:
    root = shared_dir()
    path = root / "models" / f"{name}.tflite" if root else None
    if path is None or not path.is_file():
        pytest.skip("shared models not present")
    model = path.read_bytes()
    reference = ModelReference.from_model(model, name)
    inputs = random_inputs(model, np.random.default_rng(6))
    assert _check_function(reference.function, inputs) > len(reference.function.ops)
