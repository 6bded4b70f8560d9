"""Proposal: a set of closed plans covering a part group, with its peak memory and cycles."""

from __future__ import annotations

from cascader.core.plan import Plan
from cascader.core.tensor_config import TensorConfig


class Proposal:
    """Plans (in the order they were added) covering `part_group` (bitmask). `input_configs`
    maps tensor id -> the BOUNDARY config of each tensor homed in the cascade region that the
    plans still need from outside; `input_size` is their summed tensor size. `elsewhere`
    maps every other feature map the plans read or write to the region they home it in, so
    a plan homing one of them differently cannot join (U65: the SRAM or the DRAM arena).
    `drift` maps tensor id -> the bytes below that tensor's start and above its end that
    the chain of outputs laid from it on takes: a plan laying its output over it
    (`Plan.laid`) puts the output that far below (or, turned, above), and a chain of such
    plans adds up (`proposal_generation`)."""

    __slots__ = (
        "cascade_region",
        "cycles",
        "drift",
        "elsewhere",
        "input_configs",
        "input_size",
        "memory_usage",
        "part_group",
        "plans",
    )

    def __init__(
        self,
        part_group: int,
        plans: tuple[Plan, ...],
        input_configs: dict[int, TensorConfig],
        cascade_region: str,
        memory_usage: int,
        cycles: int,
        elsewhere: dict[int, str] | None = None,
        drift: dict[int, tuple[int, int]] | None = None,
    ) -> None:
        self.part_group = part_group
        self.plans = plans
        self.input_configs = input_configs
        self.input_size = sum(c.tensor.size for c in input_configs.values())
        self.cascade_region = cascade_region
        self.memory_usage = memory_usage
        self.cycles = cycles
        self.elsewhere = elsewhere or {}
        self.drift = drift or {}

    def __repr__(self) -> str:
        return (
            f"Proposal(plans={len(self.plans)}, memory={self.memory_usage}, cycles={self.cycles})"
        )

    @property
    def part_ids(self) -> list[int]:
        return sorted(i for plan in self.plans for i in plan.part_ids)

    def to_json(self) -> dict:
        return {
            "memory_usage": self.memory_usage,
            "cycles": self.cycles,
            "plans": [plan.to_json() for plan in self.plans],
        }
