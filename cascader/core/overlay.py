"""A part's whole output laid over the whole input it reads in row order: each output stripe
lands on input rows no later stripe reads, as an MCU memory planner lays a layer's output over
its consumed input. What the "vela" model saves by it, from the stripe configs; the schedule's
allocation (`schedule.allocation.overlays`) decides it again from the steps themselves."""

from __future__ import annotations

import numpy as np

from cascader.core.part import Part, in_place_input
from cascader.core.stripe_config import StripeConfig

ROWS = 1  # the height axis, outermost after the batch in every stored layout
# How a cascader run counts outputs laid over their inputs: "turned", laid and, a single
# plan, running upward where its chain then takes fewer bytes (`Plan.laid_upward`); "down",
# laid with every stripe in row order; "apart", none laid.
LAYINGS = ("turned", "down", "apart")


def overlaid_input(part: Part) -> int:
    """The input slot whose whole buffer the part's whole output may be laid over, -1 if
    none: a device's part that stores rows outermost (`Part.rows_outermost`), writing no
    output in place of an input (`in_place_input`) and whose output no reshape aliases nor
    a consumer writes its own output over (that output shares its buffer: the schedule
    places the two as one), the first feature-map input that this part alone reads and
    one op (or the host) writes, not in place of one of its own inputs."""
    if not part.rows_outermost or part.in_line or in_place_input(part) >= 0:
        return -1
    for consumer in part.output.consumers:
        slot = in_place_input(consumer)
        if consumer.in_line or (slot >= 0 and consumer.inputs[slot] is part.output):
            return -1
    for slot, tensor in enumerate(part.inputs):
        if slot == part.weight_tensor_idx or tensor.is_constant:
            continue
        producers = tensor.producers
        if (
            len(producers) <= 1
            and not any(p.in_line or in_place_input(p) >= 0 for p in producers)
            and tensor.consumers == [part]
        ):
            return slot
    return -1


def overlay_offset(
    output: StripeConfig,
    input: StripeConfig,
    output_bytes: int,
    input_bytes: int,
    upward: bool = False,
) -> int:
    """How far below the input's start the output must begin so that no stripe writes rows
    that it or a later stripe reads, or -1 when the stripes do not run in row order (no
    rows, one stripe of rows, or another striped axis looped outside the rows). A stripe is
    taken to write and read its rows' whole bytes, over the input stripe config's extent
    (padding rows counted: conservative for a padded input). `upward`: the stripes run in
    reverse row order (the last rows first) and the output begins that far above the
    input's start, so that a chain of laid outputs may turn back instead of drifting ever
    lower."""
    if len(output.shape) < 4 or len(input.shape) < 4:
        return -1  # no rows: a vector
    count = output.stripes[ROWS]
    if count <= 1 or input.stripes[ROWS] != count:
        return -1
    outer = output.order[ROWS]
    if any(o and o < outer and n > 1 for o, n in zip(output.order, output.stripes, strict=True)):
        return -1
    out_height, in_height = output.extent[ROWS], input.extent[ROWS]
    out_row, in_row = output_bytes / out_height, input_bytes / in_height
    offset = 0.0
    for k in range(count):
        if upward:  # stripe k runs after every later one: it reads up to its last input row
            first = min(max(output.offset[ROWS] + k * output.strides[ROWS], 0), out_height)
            read = input.offset[ROWS] + k * input.strides[ROWS] + input.shape[ROWS]
            offset = max(offset, min(max(read, 0), in_height) * in_row - first * out_row)
            continue
        written = output.offset[ROWS] + k * output.strides[ROWS] + output.shape[ROWS]
        written = min(written, out_height)
        read = min(max(input.offset[ROWS] + k * input.strides[ROWS], 0), in_height)
        offset = max(offset, written * out_row - read * in_row)
    return int(-(-offset // 1))


def overlay_saving(offset, output_bytes, input_bytes, upward=False):
    """Bytes saved by laying an output of `output_bytes` `offset` bytes below an input of
    `input_bytes` (`upward`: that far above its start) instead of apart, both held whole
    (0 bytes: not held whole); 0 where `offset` is -1. Scalars or numpy arrays alike."""
    span = (
        np.maximum(input_bytes, offset + output_bytes)
        if upward
        else np.maximum(output_bytes, offset + input_bytes)
    )
    saved = input_bytes + output_bytes - span
    held = (offset >= 0) & (output_bytes > 0) & (input_bytes > 0)
    return np.where(held, np.maximum(saved, 0), 0)
