"""Part: one operation of the cascader graph, the interface the core asks a device's
operations through; InlinePart."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import IntEnum

import numpy as np

from cascader.core.costs import AccessCosts, BlockCosts, CommandBound, PerformanceInfo
from cascader.core.errors import ContractError
from cascader.core.memory_region import MemoryRegion
from cascader.core.propagator import Propagator
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor import Tensor
from cascader.memo import Memo


class BufferMode(IntEnum):
    """How a striped tensor is buffered: RECOMPUTE keeps one stripe and recomputes overlaps,
    ROLLING keeps a window over the outermost striped axis and reuses overlaps."""

    RECOMPUTE = 0
    ROLLING = 1


class Part(ABC):
    """An operation reading `inputs` (one propagator each) and writing `output`; `id` is its
    position in the graph's reverse topological part order. This is the whole of what the
    core asks of a device: a device subclasses Part, and the core reads nothing else of it.

    Contract (every answer a pure function of its arguments and the part: the core keeps
    answers for one graph across cascader runs with any options, and a part may memoise):

    - Shape: `in_line` (folded into its consumer: free, never a plan's output), `kind` and
      `to_json` (graph JSON), `stripe_align_hint` (the output stripe shapes' quantum) and
      `input_stripe_configs` (given: each propagator's map).
    - The "tvm" cost model: `prepare_costs` (abstract) is called with all output stripe
      configs of a run before `performance_info` (abstract) is asked for them one by one;
      `performance_info` returns the whole output's cost for a config and buffer mode.
    - The "vela" cost model: `block_costs` counts the whole output's cost under every block
      config the part may run with, as many and in the same order for every config (the
      default: one block, `performance_info`'s); `prepare_block_costs` announces the
      (config, mode) pairs the plans will ask; `costed_mode` names the mode `block_costs`
      counts an output in, so that modes costed alike share one answer; `access_costs`
      gives the cycles per byte of each operand moved in a memory region, per block config,
      a function of the stripe shape alone; `ifm_block_bytes` and `command_bound`, for a
      part whose block commands carry an overhead of their own, bound its compute once the
      regions are known. Per plan, the core takes the block config with the smallest
      max(compute, each region's access cycles) by the `chosen_by` sides, the first on
      ties, and charges its `counted` sides.
    - Memory: `weight_tensor_idx` (the input slot of streamed weights, -1 if none),
      `weight_encoding` (a slot's bytes as buffered), `in_place_slots` (inputs the output
      may be written over), `rows_outermost` (whether a whole output may be laid over a
      whole input read in row order, `core.overlay`) and `double_buffers_whole_weights`.

    The defaults are a device-neutral part's: no weights, no in-place output, one block
    config, every byte moved at its region's bandwidth, no per-command overhead."""

    in_line = False
    kind = "abstract"
    # The input slot whose constant the part streams as weights (-1: none). Its copies
    # count as weight copies: encoded (`weight_encoding`) and hidden under the op before.
    weight_tensor_idx: int = -1
    # The inputs an elementwise output may be written over (see `in_place_input`).
    in_place_slots: tuple[int, ...] = ()
    # Whether the part's feature maps store rows outermost after the batch and its stripes
    # write their own rows only, in order, so its whole output may be laid over rows of a
    # whole input that no later stripe reads (`core.overlay`).
    rows_outermost: bool = False

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
        self._input_configs: Memo[StripeConfig, tuple[StripeConfig, ...]] = Memo(
            "Part.input_configs"
        )

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
        the part may use (the "vela" cost model picks the block with the plan's memory
        regions known), in the same block order for every config. A part without block
        configs of its own offers its one `performance_info` cost."""
        info = self.performance_info(config, mode)
        return BlockCosts(
            np.array([info.compute_cycles], dtype=np.float64),
            np.array([info.read_bytes], dtype=np.float64),
            info.write_bytes,
            lambda: ((info.block_input_shape, info.block_output_shape),),
        )

    def prepare_block_costs(self, configs: list[StripeConfig], modes: list[BufferMode]) -> None:
        """Called before `block_costs` is asked for each of `configs` in the mode at the same
        position of `modes`, so a part can count them in bulk. The default counts nothing
        ahead."""
        return None

    def costed_mode(self, config: StripeConfig, mode: BufferMode) -> BufferMode:
        """The buffer mode `block_costs` counts an output of `config` in `mode` as: plans of
        outputs in modes costed alike share one cost. The default: `mode` itself."""
        return mode

    def access_costs(
        self, costs: BlockCosts, shape: tuple[int, ...], slot: int, region: MemoryRegion
    ) -> AccessCosts:
        """Cycles per byte of input `slot` (the output for slot = number of inputs) moved in
        `region`, per block config of `costs` (the part's `block_costs` for stripes of
        `shape`); a function of `shape`, not of the stripe counts. The default moves every
        byte at the region's bandwidth, a constant's as stored (its compression ratio),
        and chooses by the same."""
        is_read = slot < len(self.inputs)
        tensor = self.inputs[slot] if is_read else self.output
        bandwidth = region.read_bandwidth if is_read else region.write_bandwidth
        ratio = tensor.compression_ratio if tensor.is_constant else 1.0
        counted = np.full(len(costs.compute_cycles), ratio / bandwidth)
        return AccessCosts(counted, counted)

    def ifm_block_bytes(self, config: StripeConfig) -> np.ndarray | None:
        """Bytes of the main input each block command fetches, per block config, for stripes
        of `config`; None (the default) for a part whose commands carry no overhead of their
        own, which the core then never asks for `command_bound`."""
        return None

    def command_bound(
        self,
        configs: list[StripeConfig],
        modes: list[BufferMode],
        ifm_block_cycles: np.ndarray,
        ofm_cycles_per_byte: np.ndarray,
        ofm_latency: float,
        bias_latency: np.ndarray | None,
    ) -> CommandBound:
        """Compute cycles per (config, plan, block config) of `configs` (each in the mode at
        the same position of `modes`) under several plans' regions, once each block
        command's overhead bounds them: `ifm_block_cycles` per (config, plan, block config)
        (the main input area's read latency plus one `ifm_block_bytes` transfer),
        `ofm_cycles_per_byte` per (config, block config) and `ofm_latency` of the output's
        area, `bias_latency` per plan the read latency where the scale-biases live (None:
        no constants). Asked only of a part whose `ifm_block_bytes` is not None."""
        raise ContractError(
            f"{type(self).__name__} answers ifm_block_bytes (its block commands carry an "
            "overhead of their own) but does not override command_bound, which the core then "
            "asks for the compute cycles those commands bound"
        )

    def weight_encoding(self, slot: int) -> tuple[float, int]:
        """(encoded bytes per byte beyond the tensor's compression ratio, bytes per encoded
        stream) of input `slot` as the schedule buffers and copies it. The default: as
        stored, no stream overhead."""
        return 1.0, 0

    @property
    def double_buffers_whole_weights(self) -> bool:
        """Whether a plan of this part alone, computed in one stripe, double-buffers its
        copied weights, so their copies overlap its compute. The default: no."""
        return False

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
    the output of a striped schedule of its own. Device-neutral: it keeps every default of
    Part's interface (nothing moved, so no region is charged for it)."""

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
    for slot in part.in_place_slots:
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
