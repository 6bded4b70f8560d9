"""Part: one operation of the cascader graph and its abstract cost interface; InlinePart."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

import numpy as np

from cascader.core.propagator import Propagator
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor import Tensor


class BufferMode(IntEnum):
    """How a striped tensor is buffered: RECOMPUTE keeps one stripe and recomputes overlaps,
    ROLLING keeps a window over the outermost striped axis and reuses overlaps."""

    RECOMPUTE = 0
    ROLLING = 1


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
    each block's (input, output) shapes, whose innermost extents set the burst efficiency.
    The shapes are built when first asked (`shapes_of`): most costs are read from the
    part's block arrays instead, and a multi-dimensional run makes tens of thousands."""

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


class Part(ABC):
    """An operation reading `inputs` (one propagator each) and writing `output`. Subclasses
    provide the cost. `id` is the position in the graph's reverse topological part order."""

    in_line = False
    kind = "abstract"

    def __init__(
        self,
        id: int,
        inputs: list[Tensor],
        output: Tensor,
        propagators: list[Propagator],
        stripe_align_hint: tuple[int, ...] | None = None,
    ) -> None:
        if not propagators:
            raise ValueError("a part needs at least one propagator")
        if len(inputs) != len(propagators):
            raise ValueError(
                f"part {id} has {len(inputs)} inputs but {len(propagators)} propagators"
            )
        self.id = id
        self.inputs = list(inputs)
        self.output = output
        self.propagators = list(propagators)
        self.stripe_align_hint = (
            tuple(stripe_align_hint)
            if stripe_align_hint is not None
            else (1,) * propagators[0].output_dims
        )
        self._input_configs: dict[StripeConfig, tuple[StripeConfig, ...]] = {}

    def __hash__(self) -> int:
        return self.id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id}, output={self.output.id})"

    def prepare_input_stripe_configs(self, output_configs: list[StripeConfig]) -> None:
        """Propagate, as one batch per propagator, the output configs whose input configs are
        not memoised yet (a sweep's cascader runs ask again for most of them)."""
        new = [config for config in output_configs if config not in self._input_configs]
        for propagator in self.propagators:
            propagator.prepare(new)

    def input_stripe_configs(self, output_config: StripeConfig) -> tuple[StripeConfig, ...]:
        """The stripe config each input must provide for `output_config` (memoised: the same
        output config is propagated for both buffer modes and many tensor-config choices)."""
        found = self._input_configs.get(output_config)
        if found is None:
            found = tuple(p.propagate(output_config) for p in self.propagators)
            self._input_configs[output_config] = found
        return found

    @abstractmethod
    def prepare_costs(self, configs: list[StripeConfig], cost_model: str = "tvm") -> None:
        """Called with all output stripe configs of the part before plan generation asks for
        their costs one by one under `cost_model`, so a cost that is cheaper in bulk can be
        computed at once."""

    @abstractmethod
    def performance_info(self, config: StripeConfig, mode: BufferMode) -> PerformanceInfo:
        """Cost of producing the whole output tensor with output stripe config `config`."""

    def block_costs(self, config: StripeConfig, mode: BufferMode) -> BlockCosts:
        """Cost of producing the whole output tensor with `config` under each block config
        the part may use, counted as Vela's performance model counts it (the "vela" cost
        model picks the block with the plan's memory regions known). A part without block
        configs of its own offers its one `performance_info` cost."""
        info = self.performance_info(config, mode)
        return BlockCosts(
            np.array([info.compute_cycles], dtype=np.float64),
            np.array([info.read_bytes], dtype=np.float64),
            info.write_bytes,
            lambda: ((info.block_input_shape, info.block_output_shape),),
        )

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "inputs": [t.id for t in self.inputs],
            "output": self.output.id,
            "propagators": [p.to_json() for p in self.propagators],
            "stripe_align_hint": list(self.stripe_align_hint),
        }


class InlinePart(Part):
    """A part folded into its consumer (reshapes, layout changes): free to compute and never
    the output of a striped schedule of its own."""

    in_line = True
    kind = "inline"

    def __init__(
        self,
        id: int,
        inputs: list[Tensor],
        output: Tensor,
        propagators: list[Propagator],
        stripe_align_hint: tuple[int, ...] | None = None,
    ) -> None:
        super().__init__(id, inputs, output, propagators, stripe_align_hint)
        self._info = PerformanceInfo(0, (0,) * len(self.inputs), 0, (1,), (1,))

    def prepare_costs(self, configs: list[StripeConfig], cost_model: str = "tvm") -> None:
        """Nothing to prepare: an inline part is free."""

    def performance_info(self, config: StripeConfig, mode: BufferMode) -> PerformanceInfo:
        return self._info


def in_place_input(part: Part) -> int:
    """The input slot whose buffer the part's output may be written over, -1 if none: as
    Vela's allocator does for an elementwise op (`live_range.ofm_can_reuse_ifm`), the first
    input of the output's shape, type and layout (`in_place_slots`, set where the op is
    known) that this part alone reads and one part writes (not the host, nor a reshape,
    whose output shares its input's bytes)."""
    for slot in getattr(part, "in_place_slots", ()):
        tensor = part.inputs[slot]
        producers = tensor.producers
        if len(producers) == 1 and not producers[0].in_line and tensor.consumers == [part]:
            return slot
    return -1


def op_before(part: Part) -> Part | None:
    """The op that runs just before `part` on its main input: the producer of its first
    input, through in-line parts (reshapes and the like, which run no op); None for a graph
    input."""
    tensor = part.inputs[0]
    while tensor.producers:
        producer = tensor.producers[0]
        if not producer.in_line:
            return producer
        tensor = producer.inputs[0]
    return None
