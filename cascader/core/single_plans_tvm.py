"""Single-part plans under the "tvm" cost model, the original cascader's: a plan costs the
largest of its compute, its bandwidth cycles (summed in single precision, as the original
did) and its constants' copies."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cascader.core.floats import f32
from cascader.core.part import Part
from cascader.core.plan import Plan
from cascader.core.plan_context import PlanContext, per_cycle
from cascader.core.single_plan_arrays import (
    INTERIOR,
    RECOMPUTE,
    ROLLING,
    SinglePlans,
    choice,
    input_memory,
    stripe_choices,
    whole_memory,
)
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor_config import TensorConfig

# Whole-number cycle terms below this add exactly in single precision (a few of them stay
# below 2**24), so they can be summed as integers.
_SMALL = float(1 << 22)


def accumulate(terms: list[np.ndarray]) -> np.ndarray:
    """`int total = 0; total += term...` with single-precision adds, as the original summed
    bandwidth cycles, element-wise over arrays of terms (broadcast together)."""
    total = np.zeros(1, dtype=np.int64)
    for term in terms:
        total = total.astype(np.float32).astype(np.float64) + term
        total = np.trunc(total.astype(np.float32)).astype(np.int64)
    return total


def tvm_single_plans(
    part: Part,
    output_stripe_configs: list[StripeConfig],
    ctx: PlanContext,
    joinable: Callable[[TensorConfig], bool] | None,
) -> SinglePlans:
    """`generate_single_plans` under the "tvm" cost model (the original's): costs per input
    config choice from the part's `performance_info`, then summed for every combination of
    choices at once."""
    cascade = ctx.cascade
    regions = ctx.regions
    rows: list[tuple[list[list[TensorConfig]], list[TensorConfig]]] = []
    # Per input, per row: per choice (memory, copy cycles, first-copy cycles, read cycles
    # for a ROLLING output, for a RECOMPUTE output, table id + 1 if INTERIOR else 0).
    choice_costs: list[list[list[tuple]]] = [[] for _ in part.inputs]
    # Per row, per output config: (compute cycles, write cycles, memory, rolls, wanted).
    output_costs: list[list[tuple]] = []
    # Rows share input stripe configs (constants) and performance infos (they differ in
    # loop order only), so the costs depending on just one of them are computed once. The
    # transfer cycles are keyed by the infos' ids; the infos ride along in the values, so
    # no other object can take over an id while it is a key.
    fixed: dict[tuple[StripeConfig, int], list[tuple]] = {}
    transfers: dict[tuple, tuple] = {}
    for output_stripe_config, input_stripe_configs, outputs, wanted in stripe_choices(
        part, output_stripe_configs, ctx, joinable
    ):
        rolling = part.performance_info(output_stripe_config, ROLLING)
        recompute = part.performance_info(output_stripe_config, RECOMPUTE)
        infos = (id(rolling), id(recompute))
        configs = []
        for i, (sc, tensor) in enumerate(zip(input_stripe_configs, part.inputs, strict=True)):
            choices = ctx.input_configs(sc, tensor)
            configs.append(choices)
            known = fixed.get((sc, i))
            if known is None:
                known = fixed[(sc, i)] = [
                    (
                        input_memory(config, cascade),
                        *(ctx.copy_cycles(config) if config.copy_tensor else (0, 0)),
                        config.id + 1 if config.state == INTERIOR else 0,
                        config.copy_region,
                    )
                    for config in choices
                ]
            row = []
            for memory, copy_total, copy_initial, interior, region in known:
                key = (*infos, i, region)
                terms = transfers.get(key)
                if terms is None:
                    bandwidth = regions[region].read_bandwidth
                    terms = transfers[key] = (
                        *(
                            f32(
                                f32(per_cycle(info.read_bytes[i], bandwidth))
                                * ctx.efficiency(tensor, info.block_input_shape, region)
                            )
                            for info in (rolling, recompute)
                        ),
                        rolling,
                        recompute,
                    )
                row.append((memory, copy_total, copy_initial, terms[0], terms[1], interior))
            choice_costs[i].append(row)
        row = []
        for out, keep in zip(outputs, wanted, strict=True):
            info = rolling if out.buffer_mode == ROLLING else recompute
            key = (id(info), out.copy_region)
            write = transfers.get(key)
            if write is None:
                efficiency = ctx.efficiency(out.tensor, info.block_output_shape, out.copy_region)
                bandwidth = regions[out.copy_region].write_bandwidth
                write = transfers[key] = (
                    f32(f32(per_cycle(info.write_bytes, bandwidth)) * efficiency),
                    info,
                )
            memory = whole_memory(out, cascade)
            row.append((info.compute_cycles, write[0], memory, out.buffer_mode == ROLLING, keep))
        output_costs.append(row)
        rows.append((configs, outputs))
    return _single_costs(part, rows, choice_costs, output_costs, ctx)


def _single_costs(
    part: Part,
    rows: list[tuple[list[list[TensorConfig]], list[TensorConfig]]],
    choice_costs: list[list[list[tuple]]],
    output_costs: list[list[tuple]],
    ctx: PlanContext,
) -> SinglePlans:
    """`generate_single_plans`' costs of every (row, combination of input choices, output
    config) at once. A row is one output stripe config; axis 1 + (m - 1 - i) of the
    combination grid holds input i's choices, so the first input varies fastest."""
    count = len(rows)
    if not count:
        empty = np.zeros(0, dtype=np.int64)
        return SinglePlans(empty, empty, [], empty, [], empty, rows.__getitem__)
    inputs = len(part.inputs)
    width = max(len(r) for r in output_costs)
    outs = np.zeros((count, width, 5), dtype=np.float64)
    for r, row in enumerate(output_costs):
        outs[r, : len(row)] = row
    choices = [np.array(c, dtype=np.float64).reshape(count, -1, 6) for c in choice_costs]
    sizes = [c.shape[1] for c in choices]

    def spread(i: int, column: int) -> np.ndarray:
        shape = [count] + [1] * inputs
        shape[inputs - i] = sizes[i]
        return choices[i][:, :, column].reshape(shape)

    grid = (count, *reversed(sizes))
    memory = sum(spread(i, 0).astype(np.int64) for i in range(inputs)) + np.zeros(grid, np.int64)
    copy_total = sum(spread(i, 1).astype(np.int64) for i in range(inputs))
    copy_initial = sum(spread(i, 2).astype(np.int64) for i in range(inputs))
    terms = np.concatenate([c[:, :, 3:5].reshape(count, -1) for c in choices] + [outs[:, :, 1]], 1)
    exact = ((terms >= 0) & (terms < _SMALL) & (terms == np.trunc(terms))).all(axis=1)
    exact = exact.reshape((count,) + (1,) * (inputs + 1))
    reads = []
    for column in (3, 4):
        summed = np.trunc(sum(spread(i, column) for i in range(inputs))).astype(np.int64)
        accumulated = accumulate([spread(i, column) for i in range(inputs)])
        reads.append(np.where(exact[..., 0], summed, accumulated)[..., None])
    # Per (row, combination, output config).
    out_shape = (count,) + (1,) * inputs + (width,)
    compute, write, out_memory, rolls, wanted = (outs[:, :, k].reshape(out_shape) for k in range(5))
    read = np.where(rolls != 0, reads[0], reads[1])
    bandwidth = np.where(exact, read + write.astype(np.int64), accumulate([read, write]))
    copy_total, copy_initial = copy_total[..., None], copy_initial[..., None]
    cycles = np.maximum(np.maximum(compute.astype(np.int64), bandwidth), copy_total)
    cycles = np.where(cycles > copy_total, cycles + copy_initial, cycles)
    memory = memory[..., None] + out_memory.astype(np.int64)
    keep = np.broadcast_to(wanted != 0, cycles.shape)
    row, combo, out = np.nonzero(keep.reshape(count, -1, width))
    # Open input configs per (row, combination): interned from the INTERIOR choices' ids.
    code = np.zeros((count,) + (1,) * inputs, dtype=np.int64)
    for i in range(inputs):
        pair = code * (len(ctx.table) + 1) + spread(i, 5).astype(np.int64)
        _, code = np.unique(pair, return_inverse=True)
        code = code.reshape(pair.shape)
    code = np.broadcast_to(code, grid).reshape(count, -1)
    distinct, first = np.unique(code, return_index=True)
    open_inputs = []
    for index in first.tolist():
        r, c = divmod(index, code.shape[1])
        open_inputs.append(tuple(x for x in choice(rows[r][0], c) if x.state == INTERIOR))
    open_input = np.searchsorted(distinct, code[row, combo])
    # Output configs per row, interned.
    outputs: dict[TensorConfig, int] = {}
    output_ids = np.zeros((count, width), dtype=np.int64)
    for r, (_, configs) in enumerate(rows):
        output_ids[r, : len(configs)] = [outputs.setdefault(o, len(outputs)) for o in configs]
    memory = np.broadcast_to(memory, cycles.shape).reshape(count, -1, width)[row, combo, out]
    cycles = cycles.reshape(count, -1, width)[row, combo, out]
    group, cascade = 1 << part.id, ctx.cascade

    def build(index: int) -> Plan:
        o = int(out[index])
        configs, row_outputs = rows[int(row[index])]
        output = row_outputs[o]
        opens = open_inputs[int(open_input[index])]
        # The original appended every output config tried so far, not just this one.
        return Plan(
            (*choice(configs, int(combo[index])), *row_outputs[: o + 1]),
            (*opens, output) if output.state == INTERIOR else opens,
            output,
            group,
            cascade,
            int(memory[index]),
            int(cycles[index]),
        )

    return SinglePlans(
        memory, cycles, list(outputs), output_ids[row, out], open_inputs, open_input, build
    )
