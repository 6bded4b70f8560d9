"""Whether a model has a mean whose sum the `row_sum_mean` point option splits rows first
(`cascader.schedule.row_sums`) and whose input is among the model's largest feature maps,
read from the .tflite alone: a study asks only such models for the option, so others keep
the same design space. A global pool after a network's large early maps (MobileNets,
ResNets: 7 x 7 inputs a tenth of the largest map or less) never sets a floor, so splitting it
would only spend the sweep's trials."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from cascader.schedule.row_sums import MAX_ROW_WIDTH, MAX_ROWS
from cascader.simulator.tflite_runner import TensorInfo, VelaModel

# A mean's input at least this share of the model's largest feature map can set its floor.
LARGE_SHARE = 0.5


def _bytes(tensor: TensorInfo) -> int:
    return int(np.prod(tensor.shape)) * np.dtype(tensor.dtype).itemsize


@functools.cache
def has_row_sum_mean(path: str, sha256: str) -> bool:
    """Whether the model at `path` (of content `sha256`, the cache's key with the path) has
    a MEAN over H and W of a 1 x H x W x C input with 1 < H <= MAX_ROWS, W <= MAX_ROW_WIDTH,
    of at least LARGE_SHARE of the bytes of its largest feature map (a tensor that is not a
    constant)."""
    model = VelaModel.parse(Path(path).read_bytes())
    largest = max((_bytes(t) for t in model.tensors if t.data is None), default=0)
    for op in model.operators:
        if op.kind != "MEAN" or len(op.inputs) < 2:
            continue
        ifm, axes = (model.tensors[i] for i in op.inputs[:2])
        if len(ifm.shape) != 4 or axes.data is None:
            continue
        reduced = {int(a) % 4 for a in np.frombuffer(axes.data, np.dtype(axes.dtype))}
        if {1, 2} <= reduced and 3 not in reduced:
            _, height, width, _ = ifm.shape
            if (
                1 < height <= MAX_ROWS
                and width <= MAX_ROW_WIDTH
                and (_bytes(ifm) >= LARGE_SHARE * largest)
            ):
                return True
    return False
