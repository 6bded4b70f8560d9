"""What running a plan adds to a schedule, recorded once and replayed: a sweep's proposals
share most of their plans, within one cascader run and across runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cascader.ir.schedule import Buffer, Copy, Step, Stripe

EncodedSize = Callable[[int, int, int, int], int]  # (part, lo, hi, block depth) -> bytes


@dataclass(frozen=True)
class WholeTensor:
    """A whole-tensor buffer a plan uses: the tensor, the area it asks for it in, and the step
    it first uses it at."""

    tensor: int
    area: str
    first: int


@dataclass(frozen=True)
class PlanTrace:
    """What running a plan added to a schedule, with steps counted from the plan's first: per
    buffer slot (in the order the plan made or first used them) its own buffer or the whole
    tensor it used, the last step each whole tensor was used at, the steps with slots in
    place of buffer indices, its parts' block configs, and the encoded weight sizes its copy
    buffers were sized with."""

    slots: tuple[Buffer | WholeTensor, ...]
    whole_last: tuple[tuple[int, int], ...]
    steps: tuple[Step, ...]
    blocks: dict[int, tuple[int, int, int]]
    sizes: dict[tuple[int, int, int, int], int]

    def sizes_agree(self, encoded_size: EncodedSize) -> bool:
        return all(encoded_size(*args) == n for args, n in self.sizes.items())


def with_buffers(step: Step, index_of: dict[int, int], plan: int) -> Step:
    """The step with its buffer references mapped through `index_of` (-1, none, stays); a
    stripe also moves to plan `plan` (-1: keep)."""
    if isinstance(step, Copy):
        return Copy(step.tensor, step.what, step.box, index_of[step.source],
                    index_of[step.dest], step.part)  # fmt: skip
    return Stripe(
        step.part,
        step.plan if plan < 0 else plan,
        step.ofm,
        index_of[step.ofm_buffer],
        step.ofm_origin,
        tuple((box, index_of[buf], origin) for box, buf, origin in step.ifms),
        step.padding,
        step.block,
        step.channels,
        index_of[step.weights_buffer],
        index_of[step.bias_buffer],
    )
