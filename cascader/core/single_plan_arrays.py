"""A part's single plans as arrays (`SinglePlans`), and what both cost models' single plans
(`single_plans_tvm`, `single_plans_vela`) share: the stripe choices worth planning, the
cascade-region bytes of a tensor config and the input configs of one combination."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from cascader.core.part import BufferMode, Part
from cascader.core.plan import Plan
from cascader.core.plan_context import PlanContext
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor_config import TensorConfig, TensorConfigState

BOUNDARY = TensorConfigState.BOUNDARY
INTERIOR = TensorConfigState.INTERIOR
RECOMPUTE = BufferMode.RECOMPUTE
ROLLING = BufferMode.ROLLING


class SharedRead(NamedTuple):
    """An input several parts read (a skip), and per single plan whether the plan holds it
    whole in the cascade region, its `size` bytes counted in the plan's memory: a plan
    holding two of its readers holds it once (`cascader.core.plan_generation`)."""

    tensor_id: int
    size: int
    whole: np.ndarray


class LaidInput(NamedTuple):
    """The input (`tensor`) the part's whole output may be laid over (`core.overlay`), per
    single plan: the bytes the plan holds of it whole in the cascade region (0: not whole),
    its stripe config there, as an index into `stripes`, and the offset the plan's own
    whole output is laid at below it (-1: not laid). A plan merged with the open plan
    waiting for its output saves what the merged plan's whole output laid over it saves."""

    tensor: int
    bytes: np.ndarray
    stripe: np.ndarray
    stripes: list[StripeConfig]
    offset: np.ndarray


class SinglePlans:
    """A part's single plans in the original's order, as arrays: memory, cycles, and the
    output config and open input configs of each as an index into lists of the distinct
    ones; `shared`, the inputs other parts read too that some plans hold whole (only the
    "vela" cost model tells) and `laid`, the input an output may be laid over (the "vela"
    model only). Plan objects are built on demand (`plan`): most single plans only ever
    take part in candidates that are culled."""

    def __init__(
        self,
        memory: np.ndarray,
        cycles: np.ndarray,
        outputs: list[TensorConfig],
        output: np.ndarray,
        open_inputs: list[tuple[TensorConfig, ...]],
        open_input: np.ndarray,
        build: Callable[[int], Plan],
        shared: tuple[SharedRead, ...] = (),
        laid: LaidInput | None = None,
    ) -> None:
        self.memory = memory
        self.cycles = cycles
        self.outputs = outputs
        self.output = output
        self.open_inputs = open_inputs
        self.open_input = open_input
        self._build = build
        self.shared = shared
        self.laid = laid
        self._plans: dict[int, Plan] = {}

    def __len__(self) -> int:
        return len(self.memory)

    def __iter__(self) -> Iterator[Plan]:
        """Every plan, in order, built."""
        return (self.plan(index) for index in range(len(self)))

    def plan(self, index: int) -> Plan:
        found = self._plans.get(index)
        if found is None:
            found = self._plans[index] = self._build(index)
        return found


def stripe_choices(
    part: Part,
    output_stripe_configs: list[StripeConfig],
    ctx: PlanContext,
    joinable: Callable[[TensorConfig], bool] | None,
) -> Iterator[tuple[StripeConfig, tuple[StripeConfig, ...], list[TensorConfig], list[bool]]]:
    """Per output stripe config of `part` worth planning: its input stripe configs, its
    output configs and which of them to build plans for (see `generate_single_plans`)."""
    part.prepare_costs(output_stripe_configs, ctx.options.cost_model)
    rows = []
    for output_stripe_config in output_stripe_configs:
        outputs = ctx.output_configs(output_stripe_config, part.output, joinable)
        wanted = [out.state == BOUNDARY or joinable is None or joinable(out) for out in outputs]
        if any(wanted):
            rows.append((output_stripe_config, outputs, wanted))
    part.prepare_input_stripe_configs([config for config, _, _ in rows])
    for output_stripe_config, outputs, wanted in rows:
        inputs = part.input_stripe_configs(output_stripe_config)
        yield output_stripe_config, inputs, outputs, wanted


def input_memory(config: TensorConfig, cascade: str) -> int:
    """Cascade-region bytes an input config holds: the whole tensor when it is homed there,
    its buffer when it is striped or copied into it, nothing otherwise."""
    whole = whole_memory(config, cascade)
    if whole:
        return whole
    if config.home_region == cascade or config.copy_region == cascade:
        return config.buffer_size
    return 0


def whole_memory(config: TensorConfig, cascade: str) -> int:
    """The bytes of a tensor held whole in the cascade region by `config`, else 0."""
    return config.tensor.size if config.home_region == cascade and config.state == BOUNDARY else 0


def choice(options: list[list[TensorConfig]], combination: int) -> tuple[TensorConfig, ...]:
    """The `combination`-th choice of one config per input (the first input fastest)."""
    chosen = []
    for configs in options:
        combination, index = divmod(combination, len(configs))
        chosen.append(configs[index])
    return tuple(chosen)
