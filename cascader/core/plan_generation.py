"""Plan generation: whole-graph plans by merging each part's single plans
(cascader.core.single_plans) into the open plans waiting for its output tensor, parts in
reverse topological order, each bucket of candidates culled as arrays."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from cascader.core.overlay import overlay_offset, overlay_saving
from cascader.core.pareto import cull_groups
from cascader.core.part import BufferMode, Part, in_place_input
from cascader.core.plan import Plan
from cascader.core.plan_context import PlanContext
from cascader.core.single_plan_arrays import LaidInput, whole_memory
from cascader.core.single_plans import SinglePlans, generate_single_plans
from cascader.core.stripe_config import StripeConfig
from cascader.core.stripe_generation import generate_output_stripe_configs
from cascader.core.tensor_config import TensorConfig, TensorConfigState

BOUNDARY = TensorConfigState.BOUNDARY
INTERIOR = TensorConfigState.INTERIOR
RECOMPUTE = BufferMode.RECOMPUTE
ROLLING = BufferMode.ROLLING


def _never(config: TensorConfig) -> bool:
    return False


def generate_graph_plans(ctx: PlanContext) -> dict[int, list[Plan]]:
    """Closed plans per part group (bitmask), Pareto culled. Parts are visited in reverse
    topological order; each part's single plans either stand alone (BOUNDARY output) or merge
    into the open plans waiting for its output tensor (INTERIOR output). Candidates are
    culled per (part group, open configs) before any merged Plan object is built, and open
    plans are only built when a closed plan is made of them.

    Beyond the original, under the "vela" cost model a part whose output several parts read
    may leave it INTERIOR (a skip held as a delay line: `_delay_line_joins`); the original
    keeps such a tensor whole between plans. And a plan holding several readers of a tensor
    it holds whole counts the tensor once (the single plans' `shared` reads): the original
    counts it per reader, so a plan spanning a residual block looked twice its size."""
    options = ctx.options
    if options.stripe_factors <= 0:
        raise ValueError(f"stripe_factors = {options.stripe_factors}, but must be > 0")
    if options.max_plan_size <= 0:
        raise ValueError(f"max_plan_size = {options.max_plan_size}, but must be > 0")
    connecting: dict[int, dict[StripeConfig, None]] = {}
    # Per INTERIOR config: the kept open plans reading it, bucket by bucket. Plans in buckets
    # have BOUNDARY outputs, so none of them is waiting for its own output.
    waiting: dict[TensorConfig, list[_Kept]] = {}
    waiting_for: dict[int, list[TensorConfig]] = {}  # tensor id -> its configs in `waiting`
    delay_lines = options.cost_model == "vela"
    closed_plans: dict[int, list[Plan]] = {}
    for part in ctx.graph.parts:
        stripe_configs = generate_output_stripe_configs(
            part,
            options.stripe_factors,
            options.enable_striping,
            options.enable_multi_dimensional_striping,
        )
        stripe_configs.extend(connecting.get(part.output.id, ()))
        joins = waiting
        if len(part.output.consumers) != 1:
            joins = {}
            if delay_lines:
                joins = _delay_line_joins(part, waiting, waiting_for.get(part.output.id, ()))
        joinable = joins.__contains__ if joins else _never
        singles = generate_single_plans(part, stripe_configs, ctx, joinable)
        for kept in _culled_buckets(part, singles, joins, ctx):
            if not kept.open_configs:
                closed_plans[kept.group] = kept.plans()
                continue
            if not len(kept):
                continue
            for config in kept.open_configs:
                found = waiting.get(config)
                if found is None:
                    # A config's stripe configs connect once (again would change nothing).
                    for stripe_config in config.stripe_configs:
                        if stripe_config.stripe_count > 1:
                            connecting.setdefault(config.tensor.id, {})[stripe_config] = None
                    found = waiting[config] = []
                    waiting_for.setdefault(config.tensor.id, []).append(config)
                found.append(kept)
    return closed_plans


def _delay_line_joins(
    part: Part, waiting: dict[TensorConfig, list[_Kept]], configs: Iterable[TensorConfig]
) -> dict[TensorConfig, list[_Kept]]:
    """The open plans `part` may join with an INTERIOR output read by several parts: those
    holding every reader, each reading it INTERIOR from a config the output config `covers` (the
    buffer then holds the rows from the furthest ahead to the furthest behind any reader
    reads, the readers' delay line). A plan missing a reader would leave that reader a
    tensor no plan holds whole. Each reader's plan counts the buffer of what it reads: the
    one buffer they share holds the union of those, never more than their sum."""
    tensor = part.output
    readers = 0
    for consumer in tensor.consumers:
        readers |= 1 << consumer.id
    reads = len(tensor.consumers)  # one entry per input slot reading the tensor
    found: dict[TensorConfig, list[_Kept]] = {}
    for config in configs:
        kept = []
        for k in waiting[config]:
            held = [c for c in k.open_configs if c.tensor is tensor]
            # every reader inside, each reading it INTERIOR (none whole) from `config`'s buffer
            if (
                k.group & readers == readers
                and len(held) == reads
                and all(covers(config, c) for c in held)
            ):
                kept.append(k)
        if kept:
            found[config] = kept
    return found


def covers(outer: TensorConfig, inner: TensorConfig) -> bool:
    """Whether a buffer of `outer` holds every stripe of `inner`: the same mode and stripe
    grid (counts, and strides and order along the axes looped over), each stripe of `inner`
    inside the one of `outer`."""
    if outer is inner:
        return True
    if outer.buffer_mode != inner.buffer_mode or len(outer.stripe_configs) != 1:
        return False
    a, b = outer.stripe_configs[0], inner.stripe_configs[0]
    if a.stripes != b.stripes:
        return False
    for axis, count in enumerate(a.stripes):
        # an axis of one stripe is not looped: its stride and order say nothing
        if count > 1 and (a.strides[axis], a.order[axis]) != (b.strides[axis], b.order[axis]):
            return False
    return all(
        oa <= ob and ob + sb <= oa + sa
        for oa, sa, ob, sb in zip(a.offset, a.shape, b.offset, b.shape, strict=True)
    )


class _KeptTable:
    """A part's kept plans, bucket after bucket: costs and output configs up front, the Plan
    objects built on first use (most open plans never end up in a closed one). Entry i is
    single plan `single[i]` alone, or merged with entry `index[i]` of table `owners[i]`,
    into a plan of bucket `bucket[i]` ((part group, open configs) in `buckets`);
    `shared[i]`, the ids (bits) of the tensors several parts read that it holds whole;
    `laid_tensor[i]`, `laid_offset[i]`: the input its memory counts its output laid over
    (`core.overlay`: an output is laid over one input at most) and how far below, -1 if
    none."""

    __slots__ = (
        "_cascade",
        "_plans",
        "_singles",
        "bucket",
        "buckets",
        "cycles",
        "index",
        "laid_offset",
        "laid_tensor",
        "memory",
        "outputs",
        "owners",
        "shared",
        "single",
    )

    def __init__(
        self,
        singles: SinglePlans,
        buckets: list[tuple[int, tuple[TensorConfig, ...]]],
        bucket: list[int],
        single: list[int],
        owners: list[_KeptTable | None],
        index: list[int],
        memory: list[int],
        cycles: list[int],
        outputs: list[TensorConfig],
        shared: list[int],
        laid_tensor: list[int],
        laid_offset: list[int],
        cascade: str,
    ) -> None:
        self.buckets = buckets
        self.bucket = bucket
        self.single = single
        self.owners = owners
        self.index = index
        self.memory = memory
        self.cycles = cycles
        self.outputs = outputs
        self.shared = shared
        self.laid_tensor = laid_tensor
        self.laid_offset = laid_offset
        self._singles = singles
        self._cascade = cascade
        self._plans: list[Plan | None] = [None] * len(memory)

    def plan(self, i: int) -> Plan:
        found = self._plans[i]
        if found is None:
            single = self._singles.plan(self.single[i])
            owner = self.owners[i]
            if owner is None:
                found = single
            else:
                join = owner.plan(self.index[i])
                group, open_configs = self.buckets[self.bucket[i]]
                found = Plan(
                    None,
                    open_configs,
                    join.output_config,
                    group,
                    self._cascade,
                    self.memory[i],
                    self.cycles[i],
                    (single, join),
                    (self.laid_tensor[i], self.laid_offset[i])
                    if self.laid_tensor[i] >= 0
                    else None,
                )
            self._plans[i] = found
        return found


class _Kept:
    """One bucket's kept plans: entries `start` to `stop` of a part's table."""

    __slots__ = ("group", "open_configs", "start", "stop", "table")

    def __init__(
        self,
        table: _KeptTable,
        start: int,
        stop: int,
        group: int,
        open_configs: tuple[TensorConfig, ...],
    ) -> None:
        self.table = table
        self.start = start
        self.stop = stop
        self.group = group
        self.open_configs = open_configs

    def __len__(self) -> int:
        return self.stop - self.start

    def rest(self, tensor_id: int) -> tuple[TensorConfig, ...]:
        """Open configs of tensors other than `tensor_id`."""
        return tuple(c for c in self.open_configs if c.tensor.id != tensor_id)

    def plans(self) -> list[Plan]:
        return [self.table.plan(i) for i in range(self.start, self.stop)]


class _Joins:
    """The open plans each INTERIOR output config of a part can merge into, flattened into
    lists: entry 0 is the "null join" a plan with a BOUNDARY output stands alone with; each
    output config's waiting plans (those too big to grow dropped) are a run of entries."""

    def __init__(self, tensor_id: int, max_plan_size: int) -> None:
        self.tensor_id = tensor_id
        self.max_plan_size = max_plan_size
        self.owners: list[_KeptTable | None] = [None]
        self.index = [0]
        self.memory = [0]
        self.cycles = [0]
        self.outputs: list[TensorConfig | None] = [None]
        self.shared = [0]
        self.laid_tensor = [-1]
        self.laid_offset = [-1]
        self.runs: dict[TensorConfig, tuple[int, int]] = {}
        self.keys: dict[tuple[int, tuple[TensorConfig, ...]], int] = {(0, ()): 0}
        self.key = [0]

    def run(self, output: TensorConfig, waiting: dict[TensorConfig, list[_Kept]]) -> tuple:
        """(start, length) of the entries merging with a plan whose output is `output`."""
        found = self.runs.get(output)
        if found is None:
            start = len(self.owners)
            for kept in waiting.get(output, ()):
                if kept.group.bit_count() < self.max_plan_size:
                    table, first, last = kept.table, kept.start, kept.stop
                    count = last - first
                    rest = kept.rest(self.tensor_id)
                    self.key += [self.keys.setdefault((kept.group, rest), len(self.keys))] * count
                    self.owners += [table] * count
                    self.index += range(first, last)
                    self.memory += table.memory[first:last]
                    self.cycles += table.cycles[first:last]
                    self.outputs += table.outputs[first:last]
                    self.shared += table.shared[first:last]
                    self.laid_tensor += table.laid_tensor[first:last]
                    self.laid_offset += table.laid_offset[first:last]
            found = self.runs[output] = (start, len(self.owners) - start)
        return found


def _laid_savings(
    laid: LaidInput,
    single: np.ndarray,
    join: np.ndarray,
    outputs: list[TensorConfig | None],
    done: np.ndarray,
    cascade: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate (a single plan merged with an open plan, `join` > 0), the bytes saved
    by laying the merged plan's whole output over the single plan's whole input
    (`core.overlay`), where the open plan does not lay it over another (`done`) nor may
    write it in place of an input, and the offset it is laid at; a single plan alone
    counted its own saving already."""
    at = np.full(len(single), -1, dtype=np.int64)
    output_bytes = np.zeros(len(single), dtype=np.int64)
    held = laid.bytes[single]
    merged = np.flatnonzero((held > 0) & (join > 0) & ~done)
    merged_joins = join[merged].tolist()
    layable = {
        output: whole_memory(output, cascade) and not _written_in_place(output)
        for output in {outputs[j] for j in merged_joins} - {None}
    }
    offsets: dict[tuple[TensorConfig, int], int] = {}
    for i, j, stripe in zip(merged.tolist(), merged_joins,
                            laid.stripe[single[merged]].tolist(), strict=True):  # fmt: skip
        output = outputs[j]
        if output is None or not layable[output]:
            continue
        offset = offsets.get((output, stripe))
        if offset is None:
            offset = offsets[(output, stripe)] = overlay_offset(
                output.stripe_configs[0], laid.stripes[stripe], output.tensor.size, int(held[i])
            )
        at[i] = offset
        output_bytes[i] = output.tensor.size
    return overlay_saving(at, output_bytes, held), at


def _written_in_place(output: TensorConfig) -> bool:
    """Whether the op writing a plan's output may write it over one of its inputs
    (`in_place_input`: the two then share one buffer, which nothing is laid over) or writes
    more than its stripes' rows (not `rows_outermost`)."""
    return any(in_place_input(p) >= 0 or not p.rows_outermost for p in output.tensor.producers)


def _culled_buckets(
    part: Part, singles: SinglePlans, waiting: dict[TensorConfig, list[_Kept]], ctx: PlanContext
) -> Iterator[_Kept]:
    """The part's kept plans per bucket (part group, open configs), buckets in the order
    the original first filled them. Candidates (a single plan, alone or merged with an open
    plan waiting for its output config, when the pair fits the cascade region) are arrays
    in the original's order, which breaks exact ties. A closed bucket is culled per home of
    its plans' output tensor: a tensor that may live in two regions (U65: the SRAM and the
    DRAM arena) needs plans writing it to each, since its consumers' plans read it from one
    home and a proposal only joins plans that agree (one home per tensor, the original's
    setting, is the original's single cull)."""
    if not len(singles):
        return
    options = ctx.options
    joins = _Joins(part.output.id, options.max_plan_size)
    runs = [
        (0, 1) if output.state != INTERIOR else joins.run(output, waiting)
        for output in singles.outputs
    ]
    runs_by_plan = np.array(runs, dtype=np.int64).reshape(-1, 2)[singles.output]
    start, length = runs_by_plan[:, 0], runs_by_plan[:, 1]
    total = int(length.sum())
    single = np.repeat(np.arange(len(singles)), length)
    join = np.arange(total) + np.repeat(start - (np.cumsum(length) - length), length)
    memory = singles.memory[single] + np.array(joins.memory, dtype=np.int64)[join]
    for read in singles.shared:
        # held whole by this part's plan and by the plan it joins: one buffer
        held = np.array([mask >> read.tensor_id & 1 for mask in joins.shared], dtype=bool)
        memory -= np.where(read.whole[single] & held[join], read.size, 0)
    laid_tensor = np.array(joins.laid_tensor, dtype=np.int64)[join]
    laid_offset = np.array(joins.laid_offset, dtype=np.int64)[join]
    if singles.laid is not None:
        found = singles.laid
        saved, offsets = _laid_savings(found, single, join, joins.outputs, laid_tensor >= 0,
                                       ctx.cascade)  # fmt: skip
        memory -= saved
        own = (join == 0) & (found.offset[single] >= 0)
        laid_tensor = np.where((saved > 0) | own, found.tensor, laid_tensor)
        laid_offset = np.where(saved > 0, offsets, np.where(own, found.offset[single], laid_offset))
    cycles = singles.cycles[single] + np.array(joins.cycles, dtype=np.int64)[join]
    fits = (memory < ctx.regions[ctx.cascade].size) | (join == 0)
    single, join, memory, cycles = single[fits], join[fits], memory[fits], cycles[fits]
    laid_tensor, laid_offset = laid_tensor[fits], laid_offset[fits]
    key_count = len(joins.keys)
    pair = singles.open_input[single] * key_count + np.array(joins.key, dtype=np.int64)[join]
    n = len(pair)
    first = np.full(len(singles.open_inputs) * key_count, n)
    np.minimum.at(first, pair, np.arange(n))
    pairs = np.flatnonzero(first < n)
    pairs = pairs[np.argsort(first[pairs])]
    # Buckets numbered in order of their first candidate; (open inputs, rest) pairs map
    # to them.
    group = 1 << part.id
    join_keys = list(joins.keys)
    numbers: dict[tuple[int, tuple[TensorConfig, ...]], int] = {}
    bucket_of = np.zeros(len(first), dtype=np.int64)
    for code in pairs.tolist():
        join_group, rest = join_keys[code % key_count]
        key = (group | join_group, singles.open_inputs[code // key_count] + rest)
        bucket_of[code] = numbers.setdefault(key, len(numbers))
    buckets = list(numbers)
    bucket = bucket_of[pair]
    # Cull groups: a bucket, or a closed bucket's candidates with one output home.
    homes: dict[str, int] = {}
    single_home = [homes.setdefault(o.home_region, len(homes)) for o in singles.outputs]
    join_home = [-1] + [homes.setdefault(o.home_region, len(homes)) for o in joins.outputs[1:]]
    output_home = np.where(
        join == 0,
        np.array(single_home, dtype=np.int64)[singles.output[single]],
        np.array(join_home, dtype=np.int64)[join],
    )
    home_count = len(homes)
    closed = np.array([not configs for _, configs in buckets], dtype=bool)
    cull = bucket * home_count + np.where(closed[bucket], output_home, 0)
    limits = np.where(
        np.repeat(closed, home_count), options.max_closed_plans, options.max_open_plans
    )
    kept = cull_groups(cull, memory, cycles, limits, options.disable_pareto_plans)
    # The kept plans bucket after bucket, in the order the original visited buckets (its
    # first part group first; a closed bucket's homes in the order it first met them).
    first_of_cull = np.full(len(limits), n)
    in_closed = np.flatnonzero(closed[bucket])
    np.minimum.at(first_of_cull, cull[in_closed], in_closed)
    by_group: dict[int, list[int]] = {}
    for number, (key_group, _) in enumerate(buckets):
        by_group.setdefault(key_group, []).append(number)
    visits = [number for numbers_in_group in by_group.values() for number in numbers_in_group]
    rank = np.empty(len(buckets), dtype=np.int64)
    rank[visits] = np.arange(len(buckets))
    kept_cull = cull[kept]
    kept = kept[np.lexsort((first_of_cull[kept_cull], rank[bucket[kept]]))]
    stops = np.cumsum(np.bincount(rank[bucket[kept]], minlength=len(buckets))).tolist()
    kept_single, kept_join = single[kept].tolist(), join[kept].tolist()
    shared = [joins.shared[j] for j in kept_join]
    for read in singles.shared:
        bit = 1 << read.tensor_id
        shared = [m | bit if w else m for m, w in zip(shared, read.whole[kept_single], strict=True)]
    output_of = singles.output.tolist()
    owners, index = joins.owners, joins.index
    table = _KeptTable(
        singles,
        buckets,
        bucket[kept].tolist(),
        kept_single,
        [owners[j] for j in kept_join],
        [index[j] for j in kept_join],
        memory[kept].tolist(),
        cycles[kept].tolist(),
        [
            singles.outputs[output_of[i]] if j == 0 else joins.outputs[j]
            for i, j in zip(kept_single, kept_join, strict=True)
        ],
        shared,
        laid_tensor[kept].tolist(),
        laid_offset[kept].tolist(),
        ctx.cascade,
    )
    begin = 0
    for number, end in zip(visits, stops, strict=True):
        key_group, open_configs = buckets[number]
        yield _Kept(table, begin, end, key_group, open_configs)
        begin = end
