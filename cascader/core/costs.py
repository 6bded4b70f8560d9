"""What a Part answers when the core asks what a stripe costs: the typed records of its cost
interface (see `cascader.core.part.Part`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True)
class PerformanceInfo:
    """Cost of computing a whole output tensor with a given output stripe config: compute
    cycles, bytes read per input, bytes written, and the block shapes used (their innermost
    extents set the burst efficiency of the transfers)."""

    compute_cycles: int
    read_bytes: tuple[int, ...]
    write_bytes: int
    block_input_shape: tuple[int, ...]
    block_output_shape: tuple[int, ...]


@dataclass(frozen=True)
class BlockCosts:
    """Cost of computing a whole output tensor with one output stripe config, per candidate
    block config (rows): compute cycles, bytes read per input (columns), bytes written, and
    each block's (input, output) shapes. The shapes are built when first asked (`shapes_of`):
    most costs never need them, and a multi-dimensional run makes tens of thousands."""

    compute_cycles: np.ndarray
    read_bytes: np.ndarray
    write_bytes: int
    shapes_of: Callable[[], tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]]
    moved_bytes: np.ndarray = field(init=False)  # read_bytes with the write as last column

    def __post_init__(self) -> None:
        written = np.full((len(self.read_bytes), 1), float(self.write_bytes))
        object.__setattr__(self, "moved_bytes", np.hstack([self.read_bytes, written]))

    @cached_property
    def block_shapes(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        return self.shapes_of()


class AccessCosts(NamedTuple):
    """Access cycles per byte of one operand moved in one memory region, per block config:
    those the region is charged (`counted`) and those the part's block choice weighs
    (`chosen_by`), which a device may count differently (e.g. weights by element)."""

    counted: np.ndarray
    chosen_by: np.ndarray


class CommandBound(NamedTuple):
    """Compute cycles per (config, plan, block config) once each block command's own
    overhead bounds them: as charged (`counted`) and as the block choice weighs them
    (`chosen_by`)."""

    counted: np.ndarray
    chosen_by: np.ndarray
