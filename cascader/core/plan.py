"""Plan: a cascade of connected parts with its tensor configs, memory and cycles."""

from __future__ import annotations

from cascader.core.tensor_config import TensorConfig, TensorConfigState


class Plan:
    """A group of parts (bitmask of part ids) scheduled as one cascade. `open_configs` are the
    INTERIOR configs still waiting to be joined to a neighbouring plan; a plan with none is
    closed. `tensor_configs` keeps every config the plan was built from, in build order.
    `laid`: (input tensor id, offset) when the plan's memory counts its whole output laid
    that far below that whole input (`core.overlay`), else None. `laid_upward`: (offset,
    extra bytes) when the plan may instead run its stripes in reverse row order with its
    output that far above the input's start, the pair then spanning `extra` bytes more (or
    fewer): a proposal turns a laid chain back up so that it does not drift ever lower
    (`upward`, set on the copy a proposal takes, `turned`)."""

    __slots__ = (
        "_boundary",
        "_open_without",
        "_sources",
        "_tensor_configs",
        "cycles",
        "interior_region",
        "laid",
        "laid_upward",
        "memory_usage",
        "open_configs",
        "output_config",
        "part_group",
        "upward",
    )

    def __init__(
        self,
        tensor_configs: tuple[TensorConfig, ...] | None,
        open_configs: tuple[TensorConfig, ...],
        output_config: TensorConfig,
        part_group: int,
        interior_region: str,
        memory_usage: int,
        cycles: int,
        sources: tuple[Plan, Plan] | None = None,
        laid: tuple[int, int] | None = None,
        laid_upward: tuple[int, int] | None = None,
    ) -> None:
        self._tensor_configs = tensor_configs
        self.laid = laid
        self.laid_upward = laid_upward
        self.upward = False
        self._sources = sources
        self._open_without: dict[int, tuple[TensorConfig, ...]] | None = None
        self.open_configs = open_configs
        self.output_config = output_config
        self.part_group = part_group
        self.interior_region = interior_region
        self.memory_usage = memory_usage
        self.cycles = cycles
        self._boundary: tuple[TensorConfig, ...] | None = None

    def __repr__(self) -> str:
        return (
            f"Plan(parts={self.part_ids}, memory={self.memory_usage}, cycles={self.cycles}, "
            f"open={len(self.open_configs)})"
        )

    def turned(self) -> Plan:
        """A copy of this plan running its stripes in reverse row order, its output laid
        upward over its input (`laid_upward`)."""
        assert self.laid_upward is not None, "only a plan that may run upward turns"
        found = Plan(self.tensor_configs, self.open_configs, self.output_config,
                     self.part_group, self.interior_region,
                     self.memory_usage + self.laid_upward[1], self.cycles, None, self.laid,
                     self.laid_upward)  # fmt: skip
        found.upward = True
        return found

    @property
    def sources(self) -> tuple[Plan, Plan] | None:
        """The producer and consumer plans this one merges; None for a part's single plan."""
        return self._sources

    @property
    def is_closed(self) -> bool:
        return not self.open_configs

    @property
    def part_ids(self) -> list[int]:
        group, ids = self.part_group, []
        while group:
            low = group & -group
            ids.append(low.bit_length() - 1)
            group ^= low
        return ids

    @property
    def tensor_configs(self) -> tuple[TensorConfig, ...]:
        """Configs of the producer plan then the consumer plan, for merged plans. Built on
        first use: most merged plans are culled before anyone asks."""
        if self._tensor_configs is None:
            stack, flat = [self], []
            while stack:
                plan = stack.pop()
                if plan._tensor_configs is not None:
                    flat.extend(plan._tensor_configs)
                else:
                    producer, consumer = plan._sources
                    stack.append(consumer)
                    stack.append(producer)
            self._tensor_configs = tuple(flat)
        return self._tensor_configs

    def open_configs_without(self, tensor_id: int) -> tuple[TensorConfig, ...]:
        """Open configs of tensors other than `tensor_id` (memoised: a plan waiting for a
        tensor is merged with every producer plan of that tensor)."""
        if self._open_without is None:
            self._open_without = {}
        found = self._open_without.get(tensor_id)
        if found is None:
            found = tuple(c for c in self.open_configs if c.tensor.id != tensor_id)
            self._open_without[tensor_id] = found
        return found

    @property
    def boundary_configs(self) -> tuple[TensorConfig, ...]:
        """The distinct BOUNDARY configs among the plan's tensor configs, first-seen order.
        A merged plan's come from its producer's and consumer's (memoised there, since one
        plan is a source of many merged plans), without flattening its tensor configs."""
        if self._boundary is None:
            if self._sources is None:
                configs = [c for c in self.tensor_configs if c.state == TensorConfigState.BOUNDARY]
            else:
                producer, consumer = self._sources
                configs = [*producer.boundary_configs, *consumer.boundary_configs]
            self._boundary = tuple(dict.fromkeys(configs))
        return self._boundary

    def merge(self, consumer: Plan) -> Plan:
        """This plan's INTERIOR output joined to the open plan `consumer` that reads it: the
        configs concatenate, the joining config closes, memory and cycles add."""
        joined = self.output_config
        mine = self.open_configs
        if joined in mine:
            mine = tuple(c for c in mine if c is not joined)
        return Plan(
            None,
            mine + consumer.open_configs_without(joined.tensor.id),
            consumer.output_config,
            self.part_group | consumer.part_group,
            self.interior_region,
            self.memory_usage + consumer.memory_usage,
            self.cycles + consumer.cycles,
            (self, consumer),
        )

    def to_json(self) -> dict:
        found = {
            "part_group": self.part_ids,
            "memory_usage": self.memory_usage,
            "cycles": self.cycles,
            "output_config": self.output_config.to_json(),
        }
        if self.upward:  # only the "vela" model turns a plan: TVM's plans read as before
            found["upward"] = True
        return found
