"""Reading and writing a tensor of a region image: the host's side of the driver's buffers.

A `TensorPlacement` says where a tensor lives: region, byte address, shape (up to 4 axes,
read as NHWC with leading unit axes added), dtype and layout. NHWC is row-major; NHCWB16
stores (N, H, ceil(C/16), W, 16), the lanes past C being padding that nobody writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cascader.simulator.memory import RegionImage

_BRICK = 16


@dataclass(frozen=True)
class TensorPlacement:
    region: int
    address: int
    shape: tuple[int, ...]
    dtype: str = "int8"
    layout: str = "NHWC"

    @property
    def nbytes(self) -> int:
        """Bytes the tensor spans (NHCWB16 rounds the depth up to whole bricks)."""
        n, h, w, c = self._nhwc()
        if self.layout == "NHCWB16":
            c = math.ceil(c / _BRICK) * _BRICK
        return n * h * w * c * np.dtype(self.dtype).itemsize

    def _nhwc(self) -> tuple[int, int, int, int]:
        if len(self.shape) > 4:
            raise ValueError(f"shape {self.shape}: at most 4 axes")
        return tuple((1, 1, 1, 1, *self.shape)[-4:])  # type: ignore[return-value]

    def element_addresses(self) -> np.ndarray:
        """Address of every element's first byte, in NHWC order."""
        n, h, w, c = self._nhwc()
        size = np.dtype(self.dtype).itemsize
        nn, hh, ww, cc = np.meshgrid(
            np.arange(n), np.arange(h), np.arange(w), np.arange(c), indexing="ij"
        )
        if self.layout == "NHCWB16":
            bricks = math.ceil(c / _BRICK)
            index = (((nn * h + hh) * bricks + cc // _BRICK) * w + ww) * _BRICK + cc % _BRICK
        elif self.layout == "NHWC":
            index = ((nn * h + hh) * w + ww) * c + cc
        else:
            raise ValueError(f"unknown layout {self.layout!r}")
        return (self.address + index * size).astype(np.int64)


def _byte_addresses(placement: TensorPlacement) -> np.ndarray:
    size = np.dtype(placement.dtype).itemsize
    return placement.element_addresses()[..., None] + np.arange(size)


def read_tensor(image: RegionImage, placement: TensorPlacement) -> tuple[np.ndarray, bool]:
    """The tensor's values (its shape and dtype) and whether every byte of it was written.
    Raises ValueError if it does not lie inside the region."""
    addresses = _byte_addresses(placement)
    if addresses.size and (addresses.min() < 0 or addresses.max() >= image.size):
        raise ValueError(f"{placement} lies outside a region of {image.size} bytes")
    raw = np.ascontiguousarray(image.data[addresses])
    values = raw.view(np.dtype(placement.dtype).newbyteorder("<"))[..., 0]
    complete = bool(image.written[addresses].all())
    return values.reshape(placement.shape).astype(placement.dtype), complete


def write_tensor(image: RegionImage, placement: TensorPlacement, values: np.ndarray) -> None:
    """Store the values (cast to the placement's dtype) and mark their bytes written."""
    array = np.asarray(values)
    if array.size != math.prod(placement.shape):
        raise ValueError(f"{array.shape} values for a tensor of shape {placement.shape}")
    addresses = _byte_addresses(placement)
    if addresses.size and (addresses.min() < 0 or addresses.max() >= image.size):
        raise ValueError(f"{placement} lies outside a region of {image.size} bytes")
    typed = np.ascontiguousarray(array.astype(np.dtype(placement.dtype).newbyteorder("<")))
    raw = typed.view(np.uint8).reshape(addresses.shape)
    image.data[addresses] = raw
    image.written[addresses] = True
