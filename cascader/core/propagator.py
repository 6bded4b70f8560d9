"""Propagator: the affine map from an output stripe config to the input stripe config it needs."""

from __future__ import annotations

import math

import numpy as np

from cascader.core.floats import f32
from cascader.core.stripe_config import StripeConfig


class Propagator:
    """`transform` has one row per input axis plus a homogeneous row and one column per output
    axis plus a constant column; `offset` shifts each input axis. Shapes and extents map
    affinely and round up; order, stripes and offset follow the non-zero entries, since an
    output axis that feeds an input axis carries its looping onto it."""

    __slots__ = (
        "_linear",
        "_nonzero",
        "_prepared",
        "_rows",
        "_shift",
        "input_dims",
        "offset",
        "output_dims",
        "transform",
    )

    def __init__(self, transform: list[list[float]], offset: list[int]) -> None:
        matrix = np.asarray(transform, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[0] < 1:
            raise ValueError("a propagator transform must be a non-empty matrix")
        if len(offset) != matrix.shape[0] - 1:
            raise ValueError(
                f"propagator offset has {len(offset)} entries, the transform needs "
                f"{matrix.shape[0] - 1}"
            )
        self.transform = matrix
        self.offset = tuple(int(v) for v in offset)
        self.input_dims = matrix.shape[0] - 1
        self.output_dims = matrix.shape[1] - 1
        self._linear = matrix[: self.input_dims, : self.output_dims]
        self._shift = matrix[: self.input_dims, self.output_dims]
        self._nonzero = (self._linear != 0).astype(np.int64)
        for array in (self._linear, self._shift, self._nonzero):
            array.flags.writeable = False
        # Per input axis: the non-zero (output axis, coefficient) pairs and the constant term.
        self._rows = [
            (
                [(j, float(v)) for j, v in enumerate(row) if v != 0],
                float(shift),
                self.offset[i],
            )
            for i, (row, shift) in enumerate(
                zip(self._linear.tolist(), self._shift.tolist(), strict=True)
            )
        ]
        self._prepared: dict[StripeConfig, StripeConfig] = {}

    @property
    def linear(self) -> np.ndarray:
        """(input axis, output axis) coefficients of the map, read-only: a device counting
        what a block of output reads applies them to its own block shapes."""
        return self._linear

    @property
    def shift(self) -> np.ndarray:
        """The constant term added to each input axis before rounding up, read-only."""
        return self._shift

    @property
    def feeds(self) -> np.ndarray:
        """(input axis, output axis) 0/1 integers, read-only: 1 where the output axis feeds
        the input axis, so its stripe counts carry over (as `propagate` carries them)."""
        return self._nonzero

    def to_json(self) -> dict:
        return {"transform": self.transform.tolist(), "offset": list(self.offset)}

    def prepare(self, configs: list[StripeConfig]) -> None:
        """Propagate a batch of configs at once, for `propagate` to hand out: the same float
        operations in the same order, on arrays instead of one config at a time."""
        self._prepared = {}
        if not configs or len({len(c.shape) for c in configs}) != 1:
            return
        shape, extent, strides, order, stripes, offset = (
            np.array(columns, dtype=np.float64 if k < 3 else np.int64)
            for k, columns in enumerate(zip(*(c.key for c in configs), strict=True))
        )
        rows = []
        for terms, shift, axis_offset in self._rows:
            s = np.zeros(len(configs))
            e, t = s.copy(), s.copy()
            o = np.zeros(len(configs), dtype=np.int64)
            n, f = o.copy(), o.copy()
            for j, v in terms:
                s = s + v * shape[:, j]
                e = e + v * extent[:, j]
                t = t + v * strides[:, j]
                o = o + order[:, j]
                n = n + stripes[:, j]
                f = f + offset[:, j]
            rows.append(
                (
                    np.ceil(s + shift).astype(np.int64),
                    np.ceil(e + shift).astype(np.int64),
                    t.astype(np.float32).astype(np.float64),
                    o,
                    np.where(n == 0, 1, n),
                    f + axis_offset,
                )
            )
        fields = [
            list(map(tuple, np.stack(column, axis=1).tolist()))
            for column in zip(*rows, strict=True)
        ]
        make = StripeConfig.from_fields
        self._prepared = {
            config: make(*result) for config, *result in zip(configs, *fields, strict=True)
        }

    def propagate(self, config: StripeConfig) -> StripeConfig:
        """The input stripe config the output stripe config `config` reads."""
        prepared = self._prepared.pop(config, None)
        if prepared is not None:
            return prepared
        shape, extent, strides, order, stripes, offset = [], [], [], [], [], []
        c_shape, c_extent, c_strides = config.shape, config.extent, config.strides
        c_order, c_stripes, c_offset = config.order, config.stripes, config.offset
        for terms, shift, axis_offset in self._rows:
            s = e = t = 0.0
            o = n = f = 0
            for j, v in terms:
                s += v * c_shape[j]
                e += v * c_extent[j]
                t += v * c_strides[j]
                o += c_order[j]
                n += c_stripes[j]
                f += c_offset[j]
            shape.append(math.ceil(s + shift))
            extent.append(math.ceil(e + shift))
            strides.append(f32(t))
            order.append(o)
            stripes.append(n or 1)
            offset.append(f + axis_offset)
        return StripeConfig(
            tuple(shape), tuple(extent), tuple(strides), tuple(order), tuple(stripes), tuple(offset)
        )

    def propagate_shapes(self, shapes: np.ndarray) -> np.ndarray:
        """Input stripe shapes for a batch of output stripe shapes (rows), as integers."""
        return np.ceil(shapes @ self._linear.T + self._shift).astype(np.int64)
