"""Single-part plans: one per (output stripe config, input config choice, output config) of
a part, costed by the plan context's cost model; the `tvm` model's as arrays."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np

from cascader.core.floats import f32
from cascader.core.part import BufferMode, Part
from cascader.core.plan import Plan
from cascader.core.plan_context import PlanContext, part_encoding, per_cycle
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor_config import TensorConfig, TensorConfigState

BOUNDARY = TensorConfigState.BOUNDARY
INTERIOR = TensorConfigState.INTERIOR
RECOMPUTE = BufferMode.RECOMPUTE
ROLLING = BufferMode.ROLLING


# Whole-number cycle terms below this add exactly in single precision (a few of them stay
# below 2**24), so they can be summed as integers.
_SMALL = float(1 << 22)


def _accumulate(terms: list[np.ndarray]) -> np.ndarray:
    """`int total = 0; total += term...` with single-precision adds, as the original summed
    bandwidth cycles, element-wise over arrays of terms (broadcast together)."""
    total = np.zeros(1, dtype=np.int64)
    for term in terms:
        total = total.astype(np.float32).astype(np.float64) + term
        total = np.trunc(total.astype(np.float32)).astype(np.int64)
    return total


def _combinations(options: list[list[TensorConfig]]) -> list[tuple[TensorConfig, ...]]:
    """Every choice of one config per input; the first input varies fastest (original order)."""
    if not options:
        return []
    return [tuple(reversed(c)) for c in itertools.product(*reversed(options))]


def generate_single_plans(
    part: Part,
    output_stripe_configs: list[StripeConfig],
    ctx: PlanContext,
    joinable: Callable[[TensorConfig], bool] | None = None,
) -> SinglePlans:
    """One plan per (output stripe config, input config choice, output config) for `part`.
    With `joinable`, plans with an INTERIOR output config it rejects are not built (they
    could never merge into a consumer plan, so graph plan generation would drop them).
    Costs are computed per input config choice, then summed for every combination of
    choices at once."""
    if ctx.options.cost_model == "vela":
        return SinglePlans.of(_vela_single_plans(part, output_stripe_configs, ctx, joinable))
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
    for output_stripe_config, input_stripe_configs, outputs, wanted in _stripe_choices(
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
                        _input_memory(config, cascade),
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
            memory = out.tensor.size if out.home_region == cascade and out.state == BOUNDARY else 0
            row.append((info.compute_cycles, write[0], memory, out.buffer_mode == ROLLING, keep))
        output_costs.append(row)
        rows.append((configs, outputs))
    return _single_costs(part, rows, choice_costs, output_costs, ctx)


def _stripe_choices(
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
        outputs = ctx.output_configs(output_stripe_config, part.output)
        wanted = [out.state == BOUNDARY or joinable is None or joinable(out) for out in outputs]
        if any(wanted):
            rows.append((output_stripe_config, outputs, wanted))
    for propagator in part.propagators:
        propagator.prepare([config for config, _, _ in rows])
    for output_stripe_config, outputs, wanted in rows:
        inputs = part.input_stripe_configs(output_stripe_config)
        yield output_stripe_config, inputs, outputs, wanted


def _input_memory(config: TensorConfig, cascade: str) -> int:
    """Cascade-region bytes an input config holds: the whole tensor when it is homed there,
    its buffer when it is striped or copied into it, nothing otherwise."""
    if config.home_region == cascade and config.state == BOUNDARY:
        return config.tensor.size
    if config.home_region == cascade or config.copy_region == cascade:
        return config.buffer_size
    return 0


def _vela_single_plans(
    part: Part,
    output_stripe_configs: list[StripeConfig],
    ctx: PlanContext,
    joinable: Callable[[TensorConfig], bool] | None,
) -> list[Plan]:
    """`generate_single_plans` under the "vela" cost model: a plan costs what the flow's
    evaluator (Vela's performance model over the plan's stripe schedule) charges the op: the
    largest of its NPU cycles and each memory region's access cycles (the bytes the NPU reads
    and writes there, feature maps scaled by Vela's burst efficiency, over the region's
    bandwidth). The NPU cycles are the compute plus the DMA copies of its constants: the
    schedule copies them into one buffer per constant, so each slice's copy waits for the
    stripes before it, all but the first, which runs under the previous op (`copy_slack`).
    The copied constants' reads are not access cycles. The evaluator sees an op's constants
    as copied only when its weights are: a scale-bias copied alone counts as read where it
    is homed. Feature-map copies overlap the compute."""
    plans: list[Plan] = []
    group = 1 << part.id
    cascade = ctx.cascade
    weights = getattr(part, "weight_tensor_idx", -1)
    slack = ctx.copy_slack(part) if weights >= 0 else 0.0
    encodings = [part_encoding(part, slot) for slot in range(len(part.inputs))]
    for output_stripe_config, input_stripe_configs, outputs, wanted in _stripe_choices(
        part, output_stripe_configs, ctx, joinable
    ):
        # Per input option: (config, memory, overlapped DMA cycles, constant copy bytes
        # (all, first), area read when the weights are copied, when they are not).
        options = [
            [
                _vela_input(ctx, config, weights >= 0, encoding)
                for config in ctx.input_configs(sc, tensor)
            ]
            for sc, tensor, encoding in zip(
                input_stripe_configs, part.inputs, encodings, strict=True
            )
        ]
        for combo in _combinations(options):
            inputs = tuple(c[0] for c in combo)
            open_inputs = tuple(c for c in inputs if c.state == INTERIOR)
            input_memory = sum(c[1] for c in combo)
            dma = sum(c[2] for c in combo)
            copied = weights >= 0 and inputs[weights].copy_tensor
            const_area = None
            if weights >= 0:
                const_area = cascade if copied else inputs[weights].home_region
            npu_extra = 0.0
            if copied:
                areas = tuple(c[4] for c in combo)
                total = sum(c[3][0] for c in combo)
                first = sum(c[3][1] for c in combo)
                full = ctx.mem2mem(inputs[weights].home_region, cascade, total)
                npu_extra = full - min(ctx.mem2mem(inputs[weights].home_region, cascade, first),
                                       slack)  # fmt: skip
            else:
                areas = tuple(c[5] for c in combo)
            tensor_configs = inputs
            for out, keep in zip(outputs, wanted, strict=True):
                tensor_configs = (*tensor_configs, out)
                if not keep:
                    continue
                compute, access = ctx.vela_cost(
                    part,
                    output_stripe_config,
                    out.buffer_mode,
                    (*areas, out.copy_region),
                    const_area,
                )
                cycles = int(max(compute + npu_extra, dma, *access))
                boundary = out.home_region == cascade and out.state == BOUNDARY
                memory = out.tensor.size if boundary else 0
                open_configs = (*open_inputs, out) if out.state == INTERIOR else open_inputs
                plans.append(
                    Plan(
                        tensor_configs,
                        open_configs,
                        out,
                        group,
                        cascade,
                        input_memory + memory,
                        cycles,
                    )
                )
    return plans


def _vela_input(
    ctx: PlanContext, config: TensorConfig, has_weights: bool, encoding: tuple[float, int]
) -> tuple:
    """One input option of `_vela_single_plans`: (config, cascade-region bytes, overlapped
    DMA cycles, constant copy bytes (all, first), area its reads count in when the op's
    weights are copied, and when they are not). `encoding`: see `part_encoding`."""
    memory = _input_memory(config, ctx.cascade)
    if has_weights and config.tensor.is_constant:
        copy_bytes = (
            ctx.constant_copy_bytes(config, *encoding) if config.copy_tensor else (0.0, 0.0)
        )
        return (config, memory, 0.0, copy_bytes, None, config.home_region)
    dma = ctx.vela_copy(config) if config.copy_tensor else 0.0
    return (config, memory, dma, (0.0, 0.0), config.copy_region, config.copy_region)


class SinglePlans:
    """A part's single plans in the original's order, as arrays: memory, cycles, and the
    output config and open input configs of each as an index into lists of the distinct
    ones. Plan objects are built on demand (`plan`): most single plans only ever take part
    in candidates that are culled."""

    def __init__(
        self,
        memory: np.ndarray,
        cycles: np.ndarray,
        outputs: list[TensorConfig],
        output: np.ndarray,
        open_inputs: list[tuple[TensorConfig, ...]],
        open_input: np.ndarray,
        build: Callable[[int], Plan],
    ) -> None:
        self.memory = memory
        self.cycles = cycles
        self.outputs = outputs
        self.output = output
        self.open_inputs = open_inputs
        self.open_input = open_input
        self._build = build
        self._plans: dict[int, Plan] = {}

    def __len__(self) -> int:
        return len(self.memory)

    def plan(self, index: int) -> Plan:
        found = self._plans.get(index)
        if found is None:
            found = self._plans[index] = self._build(index)
        return found

    @classmethod
    def of(cls, plans: list[Plan]) -> SinglePlans:
        """Plans already built (the "vela" cost model's)."""
        outputs: dict[TensorConfig, int] = {}
        open_inputs: dict[tuple[TensorConfig, ...], int] = {}
        output, open_input = [], []
        for plan in plans:
            out = plan.output_config
            output.append(outputs.setdefault(out, len(outputs)))
            opens = plan.open_configs[:-1] if out.state == INTERIOR else plan.open_configs
            open_input.append(open_inputs.setdefault(opens, len(open_inputs)))
        return cls(
            np.array([p.memory_usage for p in plans], dtype=np.int64),
            np.array([p.cycles for p in plans], dtype=np.int64),
            list(outputs),
            np.array(output, dtype=np.int64),
            list(open_inputs),
            np.array(open_input, dtype=np.int64),
            plans.__getitem__,
        )


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
        accumulated = _accumulate([spread(i, column) for i in range(inputs)])
        reads.append(np.where(exact[..., 0], summed, accumulated)[..., None])
    # Per (row, combination, output config).
    out_shape = (count,) + (1,) * inputs + (width,)
    compute, write, out_memory, rolls, wanted = (outs[:, :, k].reshape(out_shape) for k in range(5))
    read = np.where(rolls != 0, reads[0], reads[1])
    bandwidth = np.where(exact, read + write.astype(np.int64), _accumulate([read, write]))
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
        open_inputs.append(tuple(x for x in _choice(rows[r][0], c) if x.state == INTERIOR))
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
            (*_choice(configs, int(combo[index])), *row_outputs[: o + 1]),
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


def _choice(options: list[list[TensorConfig]], combination: int) -> tuple[TensorConfig, ...]:
    """The `combination`-th choice of one config per input (the first input fastest)."""
    chosen = []
    for configs in options:
        combination, index = divmod(combination, len(configs))
        chosen.append(configs[index])
    return tuple(chosen)
