"""Single-part plans: one per (output stripe config, input config choice, output config) of
a part, costed by the plan context's cost model over all combinations of input choices at
once (arrays), Plan objects built only for the plans kept."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np

from cascader.core.floats import f32
from cascader.core.part import BufferMode, Part, in_place_input
from cascader.core.plan import Plan
from cascader.core.plan_context import PlanContext, per_cycle
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
        return _vela_single_plans(part, output_stripe_configs, ctx, joinable)
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
            memory = _whole_memory(out, cascade)
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
        outputs = ctx.output_configs(output_stripe_config, part.output, joinable)
        wanted = [out.state == BOUNDARY or joinable is None or joinable(out) for out in outputs]
        if any(wanted):
            rows.append((output_stripe_config, outputs, wanted))
    part.prepare_input_stripe_configs([config for config, _, _ in rows])
    for output_stripe_config, outputs, wanted in rows:
        inputs = part.input_stripe_configs(output_stripe_config)
        yield output_stripe_config, inputs, outputs, wanted


def _input_memory(config: TensorConfig, cascade: str) -> int:
    """Cascade-region bytes an input config holds: the whole tensor when it is homed there,
    its buffer when it is striped or copied into it, nothing otherwise."""
    whole = _whole_memory(config, cascade)
    if whole:
        return whole
    if config.home_region == cascade or config.copy_region == cascade:
        return config.buffer_size
    return 0


def _whole_memory(config: TensorConfig, cascade: str) -> int:
    """The bytes of a tensor held whole in the cascade region by `config`, else 0."""
    return config.tensor.size if config.home_region == cascade and config.state == BOUNDARY else 0


def _vela_single_plans(
    part: Part,
    output_stripe_configs: list[StripeConfig],
    ctx: PlanContext,
    joinable: Callable[[TensorConfig], bool] | None,
) -> SinglePlans:
    """`generate_single_plans` under the "vela" cost model: a plan costs what the flow's
    evaluator (Vela's performance model over the plan's stripe schedule) charges the op: the
    largest of its NPU cycles and each memory region's access cycles (the bytes the NPU reads
    and writes there times the part's cycles per byte there, `Part.access_costs`). The NPU
    cycles are the compute plus the DMA copies of its constants: the schedule copies them
    into one buffer per constant, so each slice's copy waits for the stripes before it, all
    but the first, which runs under the previous op (`copy_slack`).
    A part that double-buffers its weights alone (`Part.double_buffers_whole_weights`) is
    costed so in one stripe, as the schedule runs a plan left with that op alone (its copies
    overlap the compute; merged into a longer plan of one stripe it would be
    single-buffered, which the single plan cannot know).
    Memory counts a copied weight buffer encoded and an elementwise output written over its
    input (`in_place_input`) once, as the schedule holds them. The copied constants' reads
    are not access cycles. The evaluator sees an op's constants as copied only when its
    weights are: a scale-bias copied alone counts as read where it is homed. Feature-map
    copies overlap the compute.
    The op's cost is asked once per distinct set of areas the combinations of input choices
    read from and spread over the combinations with numpy; configs that differ only in loop
    order cost the same (only their buffers differ), so it is asked per stripe tiling (and
    output mode and area), for all of the part's at once."""
    weights = part.weight_tensor_idx
    fused = in_place_input(part)
    slack = ctx.copy_slack(part) if weights >= 0 else 0.0
    encodings = [part.weight_encoding(slot) for slot in range(len(part.inputs))]
    rows = _VelaRows()
    layout: _VelaLayout | None = None
    # Per (stripe tiling, output buffer mode, output copy region): a number, and the DMA
    # and constant copy cycles per combination. A part may cost an output in another mode
    # than its own (`Part.costed_mode`).
    tiled: dict[tuple[StripeConfig, BufferMode, str], int] = {}
    tiled_transfers: list[Transfers] = []
    double_buffers = part.double_buffers_whole_weights
    cascade = ctx.cascade
    # Per (input stripe config, slot): its options (rows share their constants' configs).
    slot_options: dict[tuple[StripeConfig, int], list[VelaInput]] = {}
    for output_stripe_config, input_stripe_configs, outs, wanted in _stripe_choices(
        part, output_stripe_configs, ctx, joinable
    ):
        options = []
        for slot, (sc, tensor) in enumerate(zip(input_stripe_configs, part.inputs, strict=True)):
            known = slot_options.get((sc, slot))
            if known is None:
                known = slot_options[(sc, slot)] = [
                    _vela_input(ctx, config, weights >= 0, encodings[slot])
                    for config in ctx.input_configs(sc, tensor)
                ]
            options.append(known)
        if not options or not all(options):
            continue
        if layout is None:
            layout = _VelaLayout(ctx, options, weights)
        tiling = ctx.tiling(output_stripe_config)
        # A part alone in one stripe may double-buffer its copied weights (the schedule's
        # `double_buffered`): their copies overlap its compute.
        overlapped = double_buffers and math.prod(output_stripe_config.stripes) == 1
        transfers = None
        kept = [o for o, keep in enumerate(wanted) if keep]
        numbers = []
        for o in kept:
            mode = part.costed_mode(tiling, outs[o].buffer_mode)
            key = (tiling, mode, outs[o].copy_region)
            number = tiled.get(key)
            if number is None:
                if transfers is None:
                    transfers = layout.transfers(options, slack, overlapped)
                number = tiled[key] = len(tiled_transfers)
                tiled_transfers.append(transfers)
            numbers.append(number)
        rows.add(layout, options, outs, kept, numbers, fused, cascade)
    if layout is None:
        empty = np.zeros(0, dtype=np.int64)
        return SinglePlans(empty, empty, [], empty, [], empty, rows.rows.__getitem__)
    row_of, combo_of, kept_at = rows.plan_positions(layout.count)
    out_of = np.array([o for kept in rows.kept_outputs for o in kept], dtype=np.int64)[kept_at]
    output_index = np.array(rows.output_numbers, dtype=np.int64)[kept_at]
    output_memory = np.array(rows.output_memory, dtype=np.int64)[kept_at]
    memory_all = layout.memory(np.array(rows.input_memory, dtype=np.int64))[row_of, combo_of]
    memory_all = memory_all + output_memory
    if fused >= 0:
        memory_all -= np.minimum(
            np.array(rows.written_over, dtype=np.int64)[row_of, layout.picks[fused][combo_of]],
            output_memory,
        )
    part.prepare_block_costs([key[0] for key in tiled], [key[1] for key in tiled])
    cycles_all = _tiled_cycles(part, layout, tiled, tiled_transfers)[
        np.array(rows.output_cycles, dtype=np.int64)[kept_at], combo_of
    ]
    opens = list(rows.open_inputs)
    open_index = np.array(rows.open_numbers, dtype=np.int64)[row_of, layout.open_codes[combo_of]]
    group = 1 << part.id

    def build(index: int) -> Plan:
        configs, row_outputs = rows.rows[int(row_of[index])]
        o = int(out_of[index])
        output = row_outputs[o]
        open_configs = opens[int(open_index[index])]
        # The original appended every output config tried so far, not just this one.
        return Plan(
            (*_choice(configs, int(combo_of[index])), *row_outputs[: o + 1]),
            (*open_configs, output) if output.state == INTERIOR else open_configs,
            output,
            group,
            cascade,
            int(memory_all[index]),
            int(cycles_all[index]),
        )

    return SinglePlans(
        memory_all, cycles_all, list(rows.outputs), output_index, opens, open_index, build
    )


class _VelaRows:
    """The rows of `_vela_single_plans` (one per output stripe config planned), gathered for
    one set of array operations over all their plans: per row, its input and output configs,
    its input choices' cascade-region bytes (slot after slot), its kept outputs' positions,
    numbers, cycles (a number in the caller's `tiled`) and cascade-region bytes, and each
    set of open inputs' number (per class of `_VelaLayout.open_positions`). An elementwise
    output written over its input (`in_place_input`) takes no bytes of its own when both are
    held whole in the cascade region: per row, the bytes of each choice of that input it
    would be written over."""

    def __init__(self) -> None:
        self.rows: list[tuple[list[list[TensorConfig]], list[TensorConfig]]] = []
        self.input_memory: list[list[int]] = []
        self.kept_outputs: list[list[int]] = []
        self.output_numbers: list[int] = []
        self.output_cycles: list[int] = []
        self.output_memory: list[int] = []
        self.open_numbers: list[list[int]] = []
        self.written_over: list[list[int]] = []
        self.outputs: dict[TensorConfig, int] = {}
        self.open_inputs: dict[tuple[TensorConfig, ...], int] = {}

    def add(
        self,
        layout: _VelaLayout,
        options: list[list[VelaInput]],
        outs: list[TensorConfig],
        kept: list[int],
        cycles: list[int],
        fused: int,
        cascade: str,
    ) -> None:
        """One row: its input `options`, output configs `outs`, the positions of those kept
        and each kept one's cycles number."""
        configs = [[option.config for option in choices] for choices in options]
        open_inputs = self.open_inputs
        self.open_numbers.append(
            [
                open_inputs.setdefault(
                    tuple(configs[slot][pick] for slot, pick in interior), len(open_inputs)
                )
                for interior in layout.open_positions
            ]
        )
        self.input_memory.append([option.memory for choices in options for option in choices])
        if fused >= 0:
            self.written_over.append([_whole_memory(o.config, cascade) for o in options[fused]])
        self.output_memory += [_whole_memory(outs[o], cascade) for o in kept]
        self.output_cycles += cycles
        self.kept_outputs.append(kept)
        self.output_numbers += [self.outputs.setdefault(outs[o], len(self.outputs)) for o in kept]
        self.rows.append((configs, outs))

    def plan_positions(self, combinations: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per plan, in the original's order (row after row, combination-major, then kept
        output): its row, its combination of input choices and its kept output's position
        among all rows' kept outputs, joined."""
        widths = np.array([len(kept) for kept in self.kept_outputs], dtype=np.int64)
        plans_per_row = combinations * widths
        row_of = np.repeat(np.arange(len(self.rows), dtype=np.int64), plans_per_row)
        starts = (np.cumsum(plans_per_row) - plans_per_row)[row_of]
        combo_of, kept_at = np.divmod(np.arange(len(row_of), dtype=np.int64) - starts,
                                      widths[row_of])  # fmt: skip
        kept_at += (np.cumsum(widths) - widths)[row_of]
        return row_of, combo_of, kept_at


def _tiled_cycles(
    part: Part,
    layout: _VelaLayout,
    tiled: dict[tuple[StripeConfig, BufferMode, str], int],
    transfers: list[Transfers],
) -> np.ndarray:
    """Cycles per (stripe tiling, mode, output area) numbered in `tiled` and combination,
    the keys with one output area costed together."""
    by_area: dict[str, list[int]] = {}
    for number, (_, _, area) in enumerate(tiled):
        by_area.setdefault(area, []).append(number)
    keys = list(tiled)
    cycles = np.empty((len(keys), layout.count), dtype=np.int64)
    for area, numbers in by_area.items():
        cycles[numbers] = layout.cycles(
            part,
            [keys[n][0] for n in numbers],
            [keys[n][1] for n in numbers],
            area,
            Transfers(*(np.stack([transfers[n][i] for n in numbers]) for i in range(3))),
        )
    return cycles


class Transfers(NamedTuple):
    """Per combination of input choices, what copies add to a "vela" plan's cycles: DMA
    cycles of copied constant operands, which overlap the compute (`dma`); NPU cycles the
    copies of feature maps and of the op's weights add to its compute (`added`); cycles of
    weight copies that run beside the compute (`beside`)."""

    dma: np.ndarray
    added: np.ndarray
    beside: np.ndarray


class _VelaLayout:
    """The combinations of input choices of a part's output stripe configs under the "vela"
    cost model (`_vela_single_plans`), the first input varying fastest. Which choices an
    input has depends on its tensor, not on the stripe config (`PlanContext.input_configs`),
    so what only depends on the kinds of choices is worked out once per part: each
    combination's picks, the areas it reads, its group of constant choices and its set of
    INTERIOR inputs. A row's options (`VelaInput`s) give the values."""

    def __init__(self, ctx: PlanContext, options: list[list[VelaInput]], weights: int) -> None:
        self.ctx, self.weights = ctx, weights
        sizes = [len(choices) for choices in options]
        self.count = math.prod(sizes)
        combination = np.arange(self.count, dtype=np.int64)
        self.starts = [sum(sizes[:slot]) for slot in range(len(sizes))]
        self.picks = []
        step = 1
        for size in sizes:
            self.picks.append(combination // step % size)
            step *= size
        configs = [[option.config for option in choices] for choices in options]
        self.copied = np.zeros(self.count, dtype=bool)
        if weights >= 0:
            self.copied = np.array([c.copy_tensor for c in configs[weights]])[self.picks[weights]]
        # Per combination: which areas it reads, as an index into `self.area_sets`.
        area_sets: list[tuple[tuple[str | None, ...], str | None]] = []
        names: dict[str | None, int] = {}
        code = np.zeros(self.count, dtype=np.int64)
        for slot, choices in enumerate(options):
            ids = np.array(
                [[names.setdefault(o.area_weights_home, len(names)),
                  names.setdefault(o.area_weights_copied, len(names))] for o in choices],
                dtype=np.int64,
            )  # fmt: skip
            code = code * (len(ctx.regions) + 2) + ids[self.picks[slot], self.copied.astype(int)]
        code = code * 2 + self.copied.astype(np.int64)
        if weights >= 0:
            # The constants' area when the weights are not copied: their home.
            homes = [names.setdefault(c.home_region, len(names)) for c in configs[weights]]
            code = code * (len(ctx.regions) + 2) + np.array(homes)[self.picks[weights]]
        first, self.area_of = _first_appearances(code)
        for combo in first:
            copied = bool(self.copied[combo])
            areas = tuple(
                choices[int(pick[combo])].area(copied)
                for choices, pick in zip(options, self.picks, strict=True)
            )
            const_area = None
            if weights >= 0:
                home = configs[weights][int(self.picks[weights][combo])].home_region
                const_area = ctx.cascade if copied else home
            area_sets.append((areas, const_area))
        self.area_sets = tuple(area_sets)
        # The constants' choices set the copies the NPU waits for: one cost per group.
        key = np.zeros(self.count, dtype=np.int64)
        if weights >= 0:
            for slot, choices in enumerate(configs):
                if slot == weights or choices[0].tensor.is_constant:
                    key = key * len(choices) + self.picks[slot]
        self.constant_firsts, self.constant_of = _first_appearances(key)
        # Per combination, which set of INTERIOR input choices it has, numbered in order of
        # first appearance; and the (slot, choice) of each set's members.
        code = np.zeros(self.count, dtype=np.int64)
        for choices, pick in zip(configs, self.picks, strict=True):
            interior = np.array(
                [i + 1 if c.state == INTERIOR else 0 for i, c in enumerate(choices)],
                dtype=np.int64,
            )
            code = code * (len(choices) + 1) + interior[pick]
        firsts, self.open_codes = _first_appearances(code)
        self.open_positions = [
            [
                (slot, int(pick[first]))
                for slot, (choices, pick) in enumerate(zip(configs, self.picks, strict=True))
                if choices[int(pick[first])].state == INTERIOR
            ]
            for first in firsts
        ]

    def memory(self, choices: np.ndarray) -> np.ndarray:
        """Per row and combination: the cascade-region bytes of its input choices, from
        each row's choices' bytes (slot after slot)."""
        return sum(
            choices[:, start + pick] for start, pick in zip(self.starts, self.picks, strict=True)
        )

    def transfers(
        self, options: list[list[VelaInput]], slack: float, overlapped: bool = False
    ) -> Transfers:
        """The `Transfers` of each combination. A feature map's
        copies each wait for the stripe before and hold up the stripe after (the schedule
        copies them into one buffer). Weights single-buffered: the whole copy adds but the
        first slice's, which hides under the previous op up to `slack`; double-buffered
        (`overlapped`), the first slice hides under the previous op and the rest under the
        compute, so the op takes the longer of its compute and the copy past `slack`."""
        dma, serial = np.zeros(self.count), np.zeros(self.count)
        for choices, pick in zip(options, self.picks, strict=True):
            cycles = np.array([o.dma for o in choices])[pick]
            if choices[0].config.tensor.is_constant:
                dma = dma + cycles
            else:
                serial = serial + cycles
        if self.weights < 0:
            return Transfers(dma, serial, np.zeros(self.count))
        ctx, weights = self.ctx, self.weights
        added, beside = [], []
        for combo in self.constant_firsts:
            chosen = [
                choices[int(pick[combo])] for choices, pick in zip(options, self.picks, strict=True)
            ]
            home = chosen[weights].config.home_region
            if not chosen[weights].config.copy_tensor:
                added.append(0.0)
                beside.append(0.0)
                continue
            total = sum(c.copy_bytes[0] for c in chosen)
            first_bytes = sum(c.copy_bytes[1] for c in chosen)
            full = ctx.mem2mem(home, ctx.cascade, total)
            if overlapped:
                added.append(0.0)
                beside.append(max(full - slack, 0.0))
            else:
                added.append(full - min(ctx.mem2mem(home, ctx.cascade, first_bytes), slack))
                beside.append(0.0)
        added = np.array(added)[self.constant_of] + serial
        return Transfers(dma, added, np.array(beside)[self.constant_of])

    def cycles(
        self,
        part: Part,
        configs: list[StripeConfig],
        modes: list[BufferMode],
        out_area: str,
        transfers: Transfers,
    ) -> np.ndarray:
        """Per output stripe config (its output in the mode at the same position of
        `modes`, copied to `out_area`) and combination: the plan's cycles, the largest of
        the NPU cycles (the copies `added` on top, at least the weight copies `beside` it),
        the overlapped DMA and each region's access cycles. `transfers`: per config (rows)
        and combination."""
        compute, access = self.ctx.vela_costs(part, configs, modes, out_area, self.area_sets)
        access = np.maximum.reduce(access, axis=2)
        npu = np.maximum(compute[:, self.area_of] + transfers.added, transfers.beside)
        return np.maximum(np.maximum(npu, transfers.dma), access[:, self.area_of]).astype(np.int64)


def _first_appearances(codes: np.ndarray) -> tuple[list[int], np.ndarray]:
    """(index of the first occurrence of each distinct code, in order of appearance; each
    entry's number in that order). A row has few combinations: a dictionary beats sorting."""
    numbers: dict[int, int] = {}
    first = []
    inverse = []
    for index, code in enumerate(codes.tolist()):
        number = numbers.get(code)
        if number is None:
            number = numbers[code] = len(first)
            first.append(index)
        inverse.append(number)
    return first, np.array(inverse, dtype=np.int64)


class VelaInput(NamedTuple):
    """One way of providing an input under the "vela" cost model (`_vela_single_plans`): its
    config, its cascade-region bytes, the overlapped DMA cycles of copying it (a feature
    map), the bytes the schedule copies of it (a constant: all, first stripe's) and the
    area its reads count in when the op's weights are copied, and when they are not (the
    evaluator sees a constant as copied only with the weights; None: not counted)."""

    config: TensorConfig
    memory: int
    dma: float
    copy_bytes: tuple[float, float]
    area_weights_copied: str | None
    area_weights_home: str | None

    def area(self, weights_copied: bool) -> str | None:
        return self.area_weights_copied if weights_copied else self.area_weights_home


def _vela_input(
    ctx: PlanContext, config: TensorConfig, has_weights: bool, encoding: tuple[float, int]
) -> VelaInput:
    """The `VelaInput` of `config`. `encoding`: see `Part.weight_encoding`."""
    memory = _input_memory(config, ctx.cascade)
    if has_weights and config.tensor.is_constant:
        copy_bytes = (
            ctx.constant_copy_bytes(config, *encoding) if config.copy_tensor else (0.0, 0.0)
        )
        if memory and encoding != (1.0, 0):
            # The schedule's buffer holds a stripe's weights encoded, not their elements.
            memory = math.ceil(memory * encoding[0] + encoding[1])
        return VelaInput(config, memory, 0.0, copy_bytes, None, config.home_region)
    dma = ctx.vela_copy(config) if config.copy_tensor else 0.0
    return VelaInput(config, memory, dma, (0.0, 0.0), config.copy_region, config.copy_region)


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

    def __iter__(self) -> Iterator[Plan]:
        """Every plan, in order, built."""
        return (self.plan(index) for index in range(len(self)))

    def plan(self, index: int) -> Plan:
        found = self._plans.get(index)
        if found is None:
            found = self._plans[index] = self._build(index)
        return found


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
