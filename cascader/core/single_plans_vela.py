"""Single-part plans under the "vela" cost model: what the flow's evaluator (Vela's
performance model over the plan's stripe schedule) charges the op, for every combination of
input choices at once."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from cascader.core.overlay import overlaid_input, overlay_offset, overlay_saving
from cascader.core.part import BufferMode, Part, in_place_input
from cascader.core.plan import Plan
from cascader.core.plan_context import PlanContext
from cascader.core.single_plan_arrays import (
    INTERIOR,
    LaidInput,
    SharedRead,
    SinglePlans,
    choice,
    input_memory,
    stripe_choices,
    whole_memory,
)
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor_config import TensorConfig


def vela_single_plans(
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
    laid = overlaid_input(part) if ctx.laying != "apart" else -1
    turns = ctx.laying == "turned"
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
    shared_slots = [
        slot
        for slot, tensor in enumerate(part.inputs)
        if not tensor.is_constant and len({c.id for c in tensor.consumers}) > 1
    ]
    # Per (input stripe config, slot): its options (rows share their constants' configs).
    slot_options: dict[tuple[StripeConfig, int], list[VelaInput]] = {}
    for output_stripe_config, input_stripe_configs, outs, wanted in stripe_choices(
        part, output_stripe_configs, ctx, joinable
    ):
        options = []
        for slot, (sc, tensor) in enumerate(zip(input_stripe_configs, part.inputs, strict=True)):
            known = slot_options.get((sc, slot))
            if known is None:
                known = slot_options[(sc, slot)] = [
                    vela_input(ctx, config, weights >= 0, encodings[slot])
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
        rows.add(layout, options, outs, kept, numbers, fused, cascade, part, output_stripe_config)
        if laid >= 0:
            rows.laid_over.append([whole_memory(o.config, cascade) for o in options[laid]])
            sizes = (part.output.size, part.inputs[laid].size)
            stripes = (output_stripe_config, input_stripe_configs[laid])
            rows.laid_offsets.append(overlay_offset(*stripes, *sizes))
            # -1 (never laid upward) in a run that turns no plan
            rows.laid_upward.append(overlay_offset(*stripes, *sizes, upward=True) if turns else -1)
            rows.laid_stripes.append(input_stripe_configs[laid])
        rows.whole.append(
            [[whole_memory(o.config, cascade) > 0 for o in options[slot]] for slot in shared_slots]
        )
    if layout is None:
        empty = np.zeros(0, dtype=np.int64)
        return SinglePlans(empty, empty, [], empty, [], empty, rows.rows.__getitem__)
    row_of, combo_of, kept_at = rows.plan_positions(layout.count)
    out_of = np.array([o for kept in rows.kept_outputs for o in kept], dtype=np.int64)[kept_at]
    output_index = np.array(rows.output_numbers, dtype=np.int64)[kept_at]
    output_memory = np.array(rows.output_memory, dtype=np.int64)[kept_at]
    rolls = np.array(rows.output_rolls, dtype=bool)[kept_at]
    memory_all = np.where(
        rolls,
        layout.memory(np.array(rows.rolled_memory, dtype=np.int64))[row_of, combo_of],
        layout.memory(np.array(rows.input_memory, dtype=np.int64))[row_of, combo_of],
    )
    memory_all = memory_all + output_memory
    if fused >= 0:
        memory_all -= np.minimum(
            np.array(rows.written_over, dtype=np.int64)[row_of, layout.picks[fused][combo_of]],
            output_memory,
        )
    laid_input = None
    # Laid upward instead (`Plan.laid_upward`): the offset (-1: not) and the bytes it adds.
    turn_offset = np.full(len(memory_all), -1, dtype=np.int64)
    turn_extra = np.zeros(len(memory_all), dtype=np.int64)
    if laid >= 0:
        laid_bytes = np.array(rows.laid_over, dtype=np.int64)[row_of, layout.picks[laid][combo_of]]
        offsets = np.array(rows.laid_offsets, dtype=np.int64)[row_of]
        saved = overlay_saving(offsets, output_memory, laid_bytes)
        memory_all -= saved
        upward = np.array(rows.laid_upward, dtype=np.int64)[row_of]
        saved_upward = overlay_saving(upward, output_memory, laid_bytes, upward=True)
        turn_offset = np.where((saved > 0) & (saved_upward > 0), upward, -1)
        turn_extra = saved - saved_upward
        laid_input = LaidInput(
            part.inputs[laid].id,
            laid_bytes,
            row_of,
            rows.laid_stripes,
            np.where(saved > 0, offsets, -1),
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
        combo = choice(configs, int(combo_of[index]))
        not_laid = laid_input is None or laid_input.offset[index] < 0
        # The original appended every output config tried so far, not just this one.
        return Plan(
            (*combo, *row_outputs[: o + 1]),
            (*open_configs, output) if output.state == INTERIOR else open_configs,
            output,
            group,
            cascade,
            int(memory_all[index]),
            int(cycles_all[index]),
            laid=None if not_laid else (laid_input.tensor, int(laid_input.offset[index])),
            laid_upward=None
            if not_laid or turn_offset[index] < 0 or not _turns(combo, output)
            else (int(turn_offset[index]), int(turn_extra[index])),
        )

    shared = tuple(
        SharedRead(
            part.inputs[slot].id,
            part.inputs[slot].size,
            np.array([whole[k] for whole in rows.whole], dtype=bool)[
                row_of, layout.picks[slot][combo_of]
            ],
        )
        for k, slot in enumerate(shared_slots)
    )
    return SinglePlans(
        memory_all,
        cycles_all,
        list(rows.outputs),
        output_index,
        opens,
        open_index,
        build,
        shared,
        laid_input,
    )


def _turns(configs: tuple[TensorConfig, ...], output: TensorConfig) -> bool:
    """Whether a single plan may run its stripes in reverse row order: it is its part's
    whole plan (its output whole, no plan joins it) and every feature map it reads is whole
    where it lives, not copied in stripe by stripe, so no stripe needs an earlier one."""
    return output.state != INTERIOR and all(
        c.tensor.is_constant or (not c.copy_tensor and c.state != INTERIOR) for c in configs
    )


class _VelaRows:
    """The rows of `vela_single_plans` (one per output stripe config planned), gathered for
    one set of array operations over all their plans: per row, its input and output configs,
    its input choices' cascade-region bytes (slot after slot; again for a rolling output,
    `rolled_memory`), its kept outputs' positions, numbers, cycles (a number in the
    caller's `tiled`), cascade-region bytes and whether they roll, and each
    set of open inputs' number (per class of `_VelaLayout.open_positions`). An elementwise
    output written over its input (`in_place_input`) takes no bytes of its own when both are
    held whole in the cascade region: per row, the bytes of each choice of that input it
    would be written over. A whole output laid over a whole input (`core.overlay`) saves
    what `overlay_saving` says: per row, the offset its stripes need (`laid_offsets`), the
    bytes of each choice of that input held whole (`laid_over`) and its stripe config
    (`laid_stripes`), and the offset laid upward instead (`laid_upward`). `whole`: per
    row, per input other parts read too, whether each choice holds it whole in the cascade
    region."""

    def __init__(self) -> None:
        self.rows: list[tuple[list[list[TensorConfig]], list[TensorConfig]]] = []
        self.input_memory: list[list[int]] = []
        self.rolled_memory: list[list[int]] = []
        self.output_rolls: list[bool] = []
        self.kept_outputs: list[list[int]] = []
        self.output_numbers: list[int] = []
        self.output_cycles: list[int] = []
        self.output_memory: list[int] = []
        self.open_numbers: list[list[int]] = []
        self.written_over: list[list[int]] = []
        self.laid_offsets: list[int] = []
        self.laid_upward: list[int] = []
        self.laid_over: list[list[int]] = []
        self.laid_stripes: list[StripeConfig] = []
        self.whole: list[list[list[bool]]] = []
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
        part: Part,
        output_stripe_config: StripeConfig,
    ) -> None:
        """One row: its input `options`, output configs `outs` (of `output_stripe_config`),
        the positions of those kept and each kept one's cycles number."""
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
        memory = [option.memory for choices in options for option in choices]
        self.input_memory.append(memory)
        rolls = [outs[o].state == INTERIOR and outs[o].buffer_mode == BufferMode.ROLLING
                 for o in kept]  # fmt: skip
        self.output_rolls += rolls
        new_rows = rolled_stripe(output_stripe_config)
        if any(rolls) and new_rows is not output_stripe_config:
            # the input stripes of the new rows a rolling output computes per stripe
            rolled = part.input_stripe_configs(new_rows)
            memory = [
                held_bytes(option.config, stripe)
                if option.config.state == INTERIOR
                else option.memory
                for choices, stripe in zip(options, rolled, strict=True)
                for option in choices
            ]
        self.rolled_memory.append(memory)
        if fused >= 0:
            self.written_over.append([whole_memory(o.config, cascade) for o in options[fused]])
        self.output_memory += [whole_memory(outs[o], cascade) for o in kept]
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
    cost model (`vela_single_plans`), the first input varying fastest. Which choices an
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
    """One way of providing an input under the "vela" cost model (`vela_single_plans`): its
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


def vela_input(
    ctx: PlanContext, config: TensorConfig, has_weights: bool, encoding: tuple[float, int]
) -> VelaInput:
    """The `VelaInput` of `config`. `encoding`: see `Part.weight_encoding`."""
    if config.state == INTERIOR:
        memory = held_bytes(config, config.stripe_configs[0])
    else:
        memory = input_memory(config, ctx.cascade)
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


def rolled_stripe(config: StripeConfig) -> StripeConfig:
    """The part of each stripe of `config` a rolling output computes anew: along the one
    axis it is striped on, the stride's rows at the stripe's end (the rows before it were
    computed by the stripe before). The schedule asks a rolling part's inputs for these
    rows only, so its producers' buffers hold what they read, not what the whole stripe
    reads, and halos do not add up along a cascade. `config` itself when striped on more
    than one axis (the schedule does not roll those) or not overlapping."""
    striped = [axis for axis, count in enumerate(config.stripes) if count > 1]
    if len(striped) != 1:
        return config
    axis = striped[0]
    step = int(config.strides[axis])
    if not 0 < step < config.shape[axis]:
        return config
    shape = list(config.shape)
    offset = list(config.offset)
    offset[axis] += shape[axis] - step
    shape[axis] = step
    return StripeConfig(tuple(shape), config.extent, config.strides, config.order,
                        config.stripes, tuple(offset))  # fmt: skip


def held_bytes(config: TensorConfig, stripe: StripeConfig) -> int:
    """Bytes the schedule holds of INTERIOR `config` when its consumer reads stripes of
    `stripe`: a stripe clipped to the tensor (a halo past its edge is padding, never
    stored) when recomputed; rolling, the clipped rows along the rolling axis of `config`
    by the whole tensor along the others (the TVM model's `buffer_size` counts the halo)."""
    tensor = config.tensor
    clipped = [min(s, e) for s, e in zip(stripe.shape, tensor.shape, strict=False)]
    if config.buffer_mode == BufferMode.RECOMPUTE:
        return tensor.scaled_bytes(math.prod(clipped))
    own = config.stripe_configs[0]
    striped = [a for a, n in enumerate(own.stripes) if n > 1 and own.order[a] != 0]
    axis = min(striped, key=lambda a: own.order[a]) if striped else 0
    rows = clipped[axis] if axis < len(clipped) else 0
    return tensor.scaled_bytes(math.prod(tensor.shape) // tensor.shape[axis] * rows)
