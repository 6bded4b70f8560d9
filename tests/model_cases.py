"""The shared models (../shared/models, or $CASCADER_SHARED) and one-operator model cases the
frontend, schedule and pipeline tests build on."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from cascader.testing.tflite_writer import OperatorDef, TensorDef, write_model

SHARED = Path(
    os.environ.get("CASCADER_SHARED", Path(__file__).resolve().parents[1].parent / "shared")
)
MODELS = SHARED / "models"
MODEL_NAMES = (
    "kws_dscnn",
    "vww_mobilenet_v1_025",
    "ic_resnet8",
    "ad_autoencoder",
    "mobilenet_v2_100_224",
)


def model_path(name: str) -> Path:
    """The shared model `name`; skips the calling test when the model set is absent."""
    path = MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"shared model {path} not present")
    return path


def act(name: str, shape: tuple[int, ...], scale: float = 0.05, zero_point: int = -3) -> TensorDef:
    """An int8 activation tensor."""
    return TensorDef(name, shape, "int8", scales=(scale,), zero_points=(zero_point,))


def const(name: str, values: np.ndarray, scale: float | None = None) -> TensorDef:
    """A constant tensor: int8 (quantised per tensor when `scale` given) or int32."""
    values = np.asarray(values)
    dtype = "int8" if values.dtype == np.int8 else "int32"
    quant = {"scales": (scale,), "zero_points": (0,)} if scale is not None else {}
    return TensorDef(name, values.shape, dtype, data=values.tobytes(), **quant)


def one_op_model(
    kind: str,
    inputs: list[TensorDef],
    outputs: list[TensorDef],
    options: dict | None = None,
) -> bytes:
    """A TFLite model of one operator; non-constant inputs become the model's inputs."""
    tensors = [*inputs, *outputs]
    op = OperatorDef(
        kind,
        tuple(range(len(inputs))),
        tuple(range(len(inputs), len(tensors))),
        options or {},
    )
    graph_inputs = [i for i, t in enumerate(inputs) if t.data is None]
    graph_outputs = list(range(len(inputs), len(tensors)))
    return write_model(tensors, [op], graph_inputs, graph_outputs, f"one {kind}")
