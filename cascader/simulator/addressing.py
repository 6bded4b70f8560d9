"""Where each element of a feature map lives, as the NPU computes it from the registers.

The (H, W) plane is cut into up to four tiles: columns from WIDTH0 on belong to tile 1 (and,
from row HEIGHT1 on, tile 3); in the first WIDTH0 columns rows from HEIGHT0 on belong to tile
2. Inside a tile, element (y, x, c) of an NHWC map is at base + y*STRIDE_Y + x*STRIDE_X +
c*size; in NHCWB16 bricks of 16 channels at base + y*STRIDE_Y + x*STRIDE_X + (c//16)*STRIDE_C
+ (c%16)*size. Rolling buffers, strided writes into concatenations and Vela's edge padding by
tile replication all fall out of these two formulas.
"""

from __future__ import annotations

import numpy as np

from cascader.simulator.descriptors import FeatureMap
from cascader.simulator.memory import Memory, Reporter

BRICK = 16


def element_addresses(fm: FeatureMap, ys: np.ndarray, xs: np.ndarray, cs: np.ndarray) -> np.ndarray:
    """Byte address of the first byte of every element (ys x xs x cs), int64."""
    y = np.asarray(ys, np.int64)[:, None]
    x = np.asarray(xs, np.int64)[None, :]
    right = x >= fm.width0
    tile = np.where(right, np.where(y >= fm.height1, 3, 1), np.where(y >= fm.height0, 2, 0))
    row = y - np.where(tile == 3, fm.height1, np.where(tile == 2, fm.height0, 0))
    col = x - np.where(right, fm.width0, 0)
    plane = np.asarray(fm.bases, np.int64)[tile] + row * fm.stride_y + col * fm.stride_x
    c = np.asarray(cs, np.int64)
    size = fm.element_bytes
    brick = (c // BRICK) * fm.stride_c + (c % BRICK) * size
    depth = brick if fm.layout == "NHCWB16" else c * size
    return plane[:, :, None] + depth[None, None, :]


def _byte_addresses(addresses: np.ndarray, size: int) -> np.ndarray:
    return addresses[..., None] + np.arange(size, dtype=np.int64)


def read_feature_map(
    memory: Memory,
    fm: FeatureMap,
    reporter: Reporter,
    ys: np.ndarray | None = None,
    xs: np.ndarray | None = None,
    cs: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The elements (default: the whole (H, W, C) box) as int64, and their addresses."""
    h, w, c = fm.shape
    ys = np.arange(h) if ys is None else ys
    xs = np.arange(w) if xs is None else xs
    cs = np.arange(c) if cs is None else cs
    addresses = element_addresses(fm, ys, xs, cs)
    size = fm.element_bytes
    raw, _ = memory.gather(fm.region, _byte_addresses(addresses, size), fm.name, reporter)
    values = np.ascontiguousarray(raw).view(np.dtype(fm.dtype).newbyteorder("<"))[..., 0]
    return values.astype(np.int64), addresses


def write_feature_map(
    memory: Memory, fm: FeatureMap, values: np.ndarray, reporter: Reporter
) -> np.ndarray:
    """Store the (H, W, C) box (cast to the map's type); returns the element addresses."""
    h, w, c = fm.shape
    addresses = element_addresses(fm, np.arange(h), np.arange(w), np.arange(c))
    raw = np.ascontiguousarray(values.astype(np.dtype(fm.dtype).newbyteorder("<")))
    raw = raw.view(np.uint8).reshape(*addresses.shape, fm.element_bytes)
    memory.scatter(fm.region, _byte_addresses(addresses, fm.element_bytes), raw, fm.name, reporter)
    return addresses
