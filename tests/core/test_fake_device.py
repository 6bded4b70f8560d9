"""The device interface is enough: a toy device written from `Part`'s contract alone (no
`cascader.ethosu`) runs through the whole core under both cost models, and the core's answers
follow what the toy device says of itself (its costs, striping, in-place output, and the
wait of its commands for their input)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from cascader.core import CascaderGraph, CascaderOptions, MemoryRegion, cascade
from cascader.core.costs import BlockCosts, CommandBound, PerformanceInfo
from cascader.core.errors import ContractError
from cascader.core.part import BufferMode, Part
from cascader.core.propagator import Propagator
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor import Tensor

# A toy NPU: every stripe is one command costing a fixed overhead on top of its elements.
CYCLES_PER_ELEMENT = 2
COMMAND_CYCLES = 64
HEIGHT, WIDTH, DEPTH = 32, 32, 8


class ToyOp(Part):
    """A toy NPU operation. "tvm": one block per stripe, compute per output element plus a
    command per stripe; inputs read stripe by stripe (all once when rolling). "vela": two
    block configs, the whole stripe or half of its rows per command, the second computing a
    tenth faster at twice the commands and reading its main input twice."""

    kind = "toy"

    def __init__(
        self,
        id: int,
        inputs: list[Tensor],
        output: Tensor,
        propagators: list[Propagator],
        weight_slot: int = -1,
        in_place: tuple[int, ...] = (),
        waits_for_input: bool = False,
    ) -> None:
        super().__init__(id, inputs, output, propagators)
        self.weight_tensor_idx = weight_slot
        self.in_place_slots = in_place
        self.waits_for_input = waits_for_input

    def prepare_costs(self, configs: list[StripeConfig], cost_model: str = "tvm") -> None:
        """Nothing is cheaper in bulk on this device."""

    def _reads(self, config: StripeConfig, mode: BufferMode) -> tuple[int, ...]:
        stripes = math.prod(config.stripes)
        reads = []
        for tensor, needed in zip(self.inputs, self.input_stripe_configs(config), strict=True):
            per_stripe = math.prod(needed.shape) * tensor.dtype_bytes
            rolls = mode == BufferMode.ROLLING and not tensor.is_constant
            reads.append(tensor.size if rolls else per_stripe * stripes)
        return tuple(reads)

    def performance_info(self, config: StripeConfig, mode: BufferMode) -> PerformanceInfo:
        stripes = math.prod(config.stripes)
        compute = math.prod(self.output.shape) * CYCLES_PER_ELEMENT + COMMAND_CYCLES * stripes
        main_input = self.input_stripe_configs(config)[0].shape
        return PerformanceInfo(
            compute, self._reads(config, mode), self.output.size, main_input, config.shape
        )

    def block_costs(self, config: StripeConfig, mode: BufferMode) -> BlockCosts:
        elements = math.prod(self.output.shape) * CYCLES_PER_ELEMENT
        compute = np.array([elements, 0.9 * elements]) + COMMAND_CYCLES * self._commands(config)
        reads = np.array([self._reads(config, mode)] * 2, dtype=np.float64)
        reads[1, 0] *= 2
        main_input = self.input_stripe_configs(config)[0].shape
        half = (*config.shape[:1], max(config.shape[1] // 2, 1), *config.shape[2:])
        return BlockCosts(
            compute,
            reads,
            self.output.size,
            lambda: ((main_input, config.shape), (main_input, half)),
        )

    def _commands(self, config: StripeConfig) -> np.ndarray:
        """Commands per block config for the whole output."""
        return math.prod(config.stripes) * np.array([1.0, 2.0])

    def ifm_block_bytes(self, config: StripeConfig) -> np.ndarray | None:
        """With `waits_for_input`, each command first fetches its share of the main input
        stripe (the whole stripe, or half of it)."""
        if not self.waits_for_input:
            return None
        needed = self.input_stripe_configs(config)[0].shape
        stripe = math.prod(needed) * self.inputs[0].dtype_bytes
        return np.array([stripe, stripe / 2])

    def command_bound(
        self,
        configs: list[StripeConfig],
        modes: list[BufferMode],
        ifm_block_cycles: np.ndarray,
        ofm_cycles_per_byte: np.ndarray,
        ofm_latency: float,
        bias_latency: np.ndarray | None,
    ) -> CommandBound:
        """The compute plus each command's input fetch (a toy's commands do not overlap
        their fetch); no output or scale-bias terms."""
        compute = np.stack(
            [self.block_costs(c, m).compute_cycles for c, m in zip(configs, modes, strict=True)]
        )[:, None]
        commands = np.stack([self._commands(config) for config in configs])[:, None]
        bound = compute + ifm_block_cycles * commands
        return CommandBound(bound, bound)


def _conv3x3() -> Propagator:
    """NHWC output -> NHWC input of a 3x3 convolution, same padding: a one-row and
    one-column halo each side, every input channel."""
    return Propagator(
        [
            [1, 0, 0, 0, 0],
            [0, 1, 0, 0, 2],
            [0, 0, 1, 0, 2],
            [0, 0, 0, 0, DEPTH],
            [0, 0, 0, 0, 1],
        ],
        [0, -1, -1, 0],
    )


def _weights() -> Propagator:
    """NHWC output -> OHWI weights: the output's channels, the whole kernel."""
    return Propagator(
        [
            [0, 0, 0, 1, 0],
            [0, 0, 0, 0, 3],
            [0, 0, 0, 0, 3],
            [0, 0, 0, 0, DEPTH],
            [0, 0, 0, 0, 1],
        ],
        [0, 0, 0, 0],
    )


def _identity() -> Propagator:
    return Propagator(np.eye(5).tolist(), [0, 0, 0, 0])


def _graph(
    in_place: bool = True, waits_for_input: bool = False
) -> tuple[CascaderGraph, dict[int, list[str]]]:
    """conv3x3 -> elementwise (written over its input when `in_place`) -> conv3x3, parts
    listed outputs first; the network's input and output homed in DRAM, the feature maps
    between in SRAM, the weights in flash."""
    fmap = (1, HEIGHT, WIDTH, DEPTH)
    tensors = [
        Tensor(0, fmap),
        Tensor(1, (DEPTH, 3, 3, DEPTH), is_constant=True),
        Tensor(2, fmap),
        Tensor(3, fmap),
        Tensor(4, (DEPTH, 3, 3, DEPTH), is_constant=True),
        Tensor(5, fmap),
    ]
    t = tensors
    parts = [
        ToyOp(0, [t[3], t[4]], t[5], [_conv3x3(), _weights()], 1, (), waits_for_input),
        ToyOp(1, [t[2]], t[3], [_identity()], in_place=(0,) if in_place else ()),
        ToyOp(2, [t[0], t[1]], t[2], [_conv3x3(), _weights()], 1, (), waits_for_input),
    ]
    homes = {tensor.id: ["FLASH" if tensor.is_constant else "SRAM"] for tensor in tensors}
    homes[0] = homes[5] = ["DRAM"]
    return CascaderGraph(tensors, parts, [t[0]], [t[5]]), homes


REGIONS = {
    "SRAM": MemoryRegion("SRAM", 1 << 20, 8, 8, 0, 0, 16),
    "DRAM": MemoryRegion("DRAM", 1 << 26, 4, 4, 32, 32, 32),
    "FLASH": MemoryRegion("FLASH", 1 << 24, 2, 2, 64, 0, 32),
}
STRIPED = CascaderOptions(enable_striping=True, stripe_factors=4)


def _proposals(options: CascaderOptions, in_place: bool = True, waits_for_input: bool = False):
    graph, homes = _graph(in_place, waits_for_input)
    return graph, cascade(graph, REGIONS, homes, options)


@pytest.mark.parametrize("cost_model", ["tvm", "vela"])
def test_the_core_proposes_schedules_of_every_toy_part(cost_model):
    graph, result = _proposals(replace(STRIPED, cost_model=cost_model))
    proposals = result.proposals
    assert proposals
    compute = sum(math.prod(p.output.shape) * CYCLES_PER_ELEMENT for p in graph.parts)
    everything = sum(tensor.size for tensor in graph.tensors)
    for proposal in proposals:
        # Each part in exactly one plan.
        assert sorted(i for plan in proposal.plans for i in plan.part_ids) == [0, 1, 2]
        # No schedule beats the toy's compute (the vela model's faster blocks at most
        # shave a tenth); no schedule holds more than every tensor at once.
        assert proposal.cycles >= 0.9 * compute
        assert 0 < proposal.memory_usage <= everything
    # A Pareto front: less memory costs more cycles.
    memory = [p.memory_usage for p in proposals]
    cycles = [p.cycles for p in proposals]
    assert memory == sorted(memory)
    assert cycles == sorted(cycles, reverse=True)
    assert result.chosen.memory_usage < REGIONS["SRAM"].size


@pytest.mark.parametrize("cost_model", ["tvm", "vela"])
def test_striping_the_toy_trades_cycles_for_memory(cost_model):
    options = replace(STRIPED, cost_model=cost_model)
    _, whole = _proposals(replace(options, enable_striping=False))
    _, striped = _proposals(options)
    fmap = HEIGHT * WIDTH * DEPTH
    # Unstriped, some plan holds a whole feature map in and one out.
    assert min(p.memory_usage for p in whole.proposals) >= fmap
    smallest = min(striped.proposals, key=lambda p: p.memory_usage)
    assert smallest.memory_usage < min(p.memory_usage for p in whole.proposals) / 2
    # The toy charges a command per stripe: the smallest schedule pays for its stripes.
    assert smallest.cycles > min(p.cycles for p in whole.proposals)


def test_the_toy_s_in_place_output_is_held_once_under_the_vela_model():
    """The "vela" model counts an output written over its input (`in_place_slots`) once."""
    options = replace(STRIPED, cost_model="vela", enable_striping=False)
    _, shared = _proposals(options, in_place=True)
    _, apart = _proposals(options, in_place=False)
    assert min(p.memory_usage for p in shared.proposals) < min(
        p.memory_usage for p in apart.proposals
    )


def test_the_toy_s_commands_waiting_for_their_input_cost_cycles_under_the_vela_model():
    """A part whose commands wait for their input (`ifm_block_bytes`, `command_bound`) has
    the wait charged: unstriped, the convolution reading the network's input in place from
    DRAM waits at least for all of it at DRAM's bandwidth."""
    options = replace(STRIPED, cost_model="vela", enable_striping=False)
    _, free = _proposals(options)
    _, waiting = _proposals(options, waits_for_input=True)
    fetch = HEIGHT * WIDTH * DEPTH / REGIONS["DRAM"].read_bandwidth
    assert [p.memory_usage for p in waiting.proposals] == [p.memory_usage for p in free.proposals]
    for slow, fast in zip(waiting.proposals, free.proposals, strict=True):
        assert slow.cycles >= fast.cycles + fetch


def test_a_part_whose_commands_wait_but_that_gives_no_bound_is_named_as_breaking_the_contract():
    """The default `command_bound` is a guard: a device that answers `ifm_block_bytes` must
    write its own, and the error says which part's class did not and what it is for."""
    graph, _ = _graph(True, True)
    with pytest.raises(ContractError, match=r"ToyOp answers ifm_block_bytes .* command_bound"):
        Part.command_bound(graph.parts[0], [], [], np.zeros(0), np.zeros(0), 0.0, None)
