"""Plan generation: single-part plans for each candidate stripe config, then whole-graph plans
by merging open plans along the graph in reverse topological order."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from cascader.core.floats import f32
from cascader.core.graph import CascaderGraph
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.pareto import cull_plans
from cascader.core.part import BufferMode, Part
from cascader.core.plan import Plan
from cascader.core.stripe_config import StripeConfig, count_stripes
from cascader.core.stripe_generation import generate_output_stripe_configs
from cascader.core.tensor import Tensor
from cascader.core.tensor_config import TensorConfig, TensorConfigState, TensorConfigTable

BOUNDARY = TensorConfigState.BOUNDARY
INTERIOR = TensorConfigState.INTERIOR
RECOMPUTE = BufferMode.RECOMPUTE
ROLLING = BufferMode.ROLLING


def _per_cycle(nbytes: int, bandwidth: float) -> int | float:
    """Bytes over a bandwidth the way the original divided: whole-number bandwidths divide as
    integers (truncating), fractional ones as reals."""
    if float(bandwidth).is_integer():
        return nbytes // int(bandwidth)
    return nbytes / bandwidth


def transfer_efficiency(
    tensor: Tensor, block_shape: tuple[int, ...], region: MemoryRegion
) -> float:
    """Cycle multiplier for moving blocks of `block_shape`: a transfer shorter than the
    region's burst still costs a whole burst. The contiguous run is the innermost block axis,
    times the next one when the block spans the tensor's innermost axis."""
    burst = block_shape[-1]
    if block_shape[-1] == tensor.shape[-1]:
        burst *= block_shape[-2] if len(block_shape) > 1 else 1
    burst *= tensor.dtype_bytes
    return f32(region.burst_length / min(burst, region.burst_length))


def copy_cycles_hint(config: TensorConfig, regions: dict[str, MemoryRegion]) -> tuple[int, int]:
    """(total, first block) cycles to copy a tensor stripe by stripe from its home region to
    its copy region, each stripe fetching only what the previous one did not (sliding)."""
    tensor = config.tensor
    home, copy = regions[config.home_region], regions[config.copy_region]
    total = initial = 0
    for stripe_config in config.stripe_configs:
        first = True
        for shape, count in count_stripes(stripe_config, sliding=True):
            elements = 1
            for v in shape:
                elements *= v
            moved = int(
                f32(f32(f32(elements * tensor.dtype_bytes) * tensor.compression_ratio) * count)
            )
            read = int(moved * home.read_bandwidth + home.read_latency)
            write = int(moved * copy.write_bandwidth)
            if first:
                initial += max(read, write)
                first = False
            total += max(read, write)
    return total, initial


@dataclass
class PlanContext:
    """Everything plan generation shares across parts: regions, homes, options, the interned
    tensor configs and the per-config caches."""

    graph: CascaderGraph
    regions: dict[str, MemoryRegion]
    home_map: dict[int, list[str]]
    options: CascaderOptions
    table: TensorConfigTable = field(default_factory=TensorConfigTable)
    _inputs: dict = field(default_factory=dict)
    _outputs: dict = field(default_factory=dict)
    _copy: dict = field(default_factory=dict)
    _efficiency: dict = field(default_factory=dict)

    @property
    def cascade(self) -> str:
        return self.options.cascade_region

    def input_configs(self, config: StripeConfig, tensor: Tensor) -> list[TensorConfig]:
        """Ways an input can be provided: BOUNDARY in each home region (read in place if homed
        in the cascade region or too big to copy; copied to the cascade region otherwise) and,
        for non-constants, INTERIOR in the cascade region, recomputed or rolling."""
        key = (config, tensor.id)
        found = self._inputs.get(key)
        if found is not None:
            return found
        cascade, get, stripes = self.cascade, self.table.get, (config,)
        configs = []
        for home in self.home_map[tensor.id]:
            if home == cascade or tensor.size > self.options.always_copy_size:
                configs.append(get(tensor, home, BOUNDARY, RECOMPUTE, stripes, False, home))
            if home != cascade:
                configs.append(get(tensor, home, BOUNDARY, ROLLING, stripes, True, cascade))
        if not tensor.is_constant:
            configs.append(get(tensor, cascade, INTERIOR, RECOMPUTE, stripes, False, cascade))
            configs.append(get(tensor, cascade, INTERIOR, ROLLING, stripes, False, cascade))
        self._inputs[key] = configs
        return configs

    def output_configs(self, config: StripeConfig, tensor: Tensor) -> list[TensorConfig]:
        """BOUNDARY in each home region when stripes do not overlap, plus INTERIOR recomputed
        or rolling in the cascade region."""
        key = (config, tensor.id)
        found = self._outputs.get(key)
        if found is not None:
            return found
        cascade, get, stripes = self.cascade, self.table.get, (config,)
        configs = []
        if config.non_overlapping:
            for home in self.home_map[tensor.id]:
                configs.append(get(tensor, home, BOUNDARY, RECOMPUTE, stripes, False, home))
        configs.append(get(tensor, cascade, INTERIOR, RECOMPUTE, stripes, False, cascade))
        configs.append(get(tensor, cascade, INTERIOR, ROLLING, stripes, False, cascade))
        self._outputs[key] = configs
        return configs

    def copy_cycles(self, config: TensorConfig) -> tuple[int, int]:
        found = self._copy.get(config.id)
        if found is None:
            found = copy_cycles_hint(config, self.regions)
            self._copy[config.id] = found
        return found

    def efficiency(self, tensor: Tensor, block_shape: tuple[int, ...], region: str) -> float:
        key = (tensor.id, block_shape, region)
        found = self._efficiency.get(key)
        if found is None:
            found = transfer_efficiency(tensor, block_shape, self.regions[region])
            self._efficiency[key] = found
        return found


# Whole-number cycle terms below this add exactly in single precision (a few of them stay
# below 2**24), so they can be summed as integers.
_SMALL = float(1 << 22)


def _accumulate(terms: list[float]) -> int:
    """`int total = 0; total += term...` with single-precision adds, as the original summed
    bandwidth cycles."""
    total = 0
    for term in terms:
        total = int(f32(f32(total) + term))
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
) -> list[Plan]:
    """One plan per (output stripe config, input config choice, output config) for `part`.
    With `joinable`, plans with an INTERIOR output config it rejects are not built (they
    could never merge into a consumer plan, so graph plan generation would drop them)."""
    plans: list[Plan] = []
    group = 1 << part.id
    cascade = ctx.cascade
    regions = ctx.regions
    part.prepare_costs(output_stripe_configs)
    for output_stripe_config in output_stripe_configs:
        input_stripe_configs = part.input_stripe_configs(output_stripe_config)
        outputs = ctx.output_configs(output_stripe_config, part.output)
        wanted = [out.state == BOUNDARY or joinable is None or joinable(out) for out in outputs]
        if not any(wanted):
            continue
        rolling = part.performance_info(output_stripe_config, ROLLING)
        recompute = part.performance_info(output_stripe_config, RECOMPUTE)
        # Per input option: (config, memory, copy cycles, first-copy cycles, read cycles for
        # a ROLLING output, read cycles for a RECOMPUTE output).
        options = []
        for i, (sc, tensor) in enumerate(zip(input_stripe_configs, part.inputs, strict=True)):
            choices = []
            for config in ctx.input_configs(sc, tensor):
                copy_total, copy_initial = ctx.copy_cycles(config) if config.copy_tensor else (0, 0)
                if config.home_region == cascade and config.state == BOUNDARY:
                    memory = tensor.size
                elif config.home_region == cascade or config.copy_region == cascade:
                    memory = config.buffer_size
                else:
                    memory = 0
                bandwidth = regions[config.copy_region].read_bandwidth
                terms = [
                    f32(
                        f32(_per_cycle(info.read_bytes[i], bandwidth))
                        * ctx.efficiency(tensor, info.block_input_shape, config.copy_region)
                    )
                    for info in (rolling, recompute)
                ]
                choices.append((config, memory, copy_total, copy_initial, *terms))
            options.append(choices)
        output_terms = []
        for out in outputs:
            info = rolling if out.buffer_mode == ROLLING else recompute
            efficiency = ctx.efficiency(out.tensor, info.block_output_shape, out.copy_region)
            write = f32(
                f32(_per_cycle(info.write_bytes, regions[out.copy_region].write_bandwidth))
                * efficiency
            )
            memory = out.tensor.size if out.home_region == cascade and out.state == BOUNDARY else 0
            output_terms.append((out, info.compute_cycles, write, memory))
        exact = all(
            0 <= t < _SMALL and t == int(t)
            for t in [w for _, _, w, _ in output_terms]
            + [t for choices in options for c in choices for t in c[4:]]
        )
        for combo in _combinations(options):
            inputs = tuple(c[0] for c in combo)
            open_inputs = tuple(c for c in inputs if c.state == INTERIOR)
            input_memory = copy_total = copy_initial = read_rolling = read_recompute = 0
            for _, memory, total, initial, for_rolling, for_recompute in combo:
                input_memory += memory
                copy_total += total
                copy_initial += initial
                read_rolling += for_rolling
                read_recompute += for_recompute
            if exact:
                read_rolling = int(read_rolling)
                read_recompute = int(read_recompute)
            else:
                read_rolling = _accumulate([c[4] for c in combo])
                read_recompute = _accumulate([c[5] for c in combo])
            tensor_configs = inputs
            for (out, compute_cycles, write, out_memory), keep in zip(
                output_terms, wanted, strict=True
            ):
                # The original appended every output config tried so far, not just this one.
                tensor_configs = (*tensor_configs, out)
                if not keep:
                    continue
                read = read_rolling if out.buffer_mode == ROLLING else read_recompute
                bandwidth = read + int(write) if exact else _accumulate([read, write])
                cycles = max(compute_cycles, bandwidth, copy_total)
                if cycles > copy_total:
                    cycles += copy_initial
                open_configs = (*open_inputs, out) if out.state == INTERIOR else open_inputs
                plans.append(
                    Plan(
                        tensor_configs,
                        open_configs,
                        out,
                        group,
                        cascade,
                        input_memory + out_memory,
                        cycles,
                    )
                )
    return plans


def _never(config: TensorConfig) -> bool:
    return False


def _cull_closed(entries: list[tuple], options: CascaderOptions) -> list[tuple]:
    """Closed plan candidates culled per home of their output tensor. A tensor that may
    live in two regions (U65: the SRAM and the DRAM arena) needs plans writing it to each:
    its consumers' plans read it from one home, and a proposal only joins plans that agree,
    so one Pareto front across both homes could keep only plans no consumer can join. With
    one home per tensor (the original's setting) this is the original's single cull."""
    by_home: dict[str, list[tuple]] = {}
    for entry in entries:
        plan, join = entry[2], entry[3]
        output = (plan if join is None else join).output_config
        by_home.setdefault(output.home_region, []).append(entry)
    return [
        kept
        for group in by_home.values()
        for kept in cull_plans(group, options.max_closed_plans, options.disable_pareto_plans)
    ]


def generate_graph_plans(ctx: PlanContext) -> dict[int, list[Plan]]:
    """Closed plans per part group (bitmask), Pareto culled. Parts are visited in reverse
    topological order; each part's single plans either stand alone (BOUNDARY output) or merge
    into the open plans waiting for its output tensor (INTERIOR output). Candidates are
    culled per (part group, open configs) before any merged Plan object is built."""
    options = ctx.options
    if options.stripe_factors <= 0:
        raise ValueError(f"stripe_factors = {options.stripe_factors}, but must be > 0")
    if options.max_plan_size <= 0:
        raise ValueError(f"max_plan_size = {options.max_plan_size}, but must be > 0")
    cascade = ctx.cascade
    region_size = ctx.regions[cascade].size
    connecting: dict[int, dict[StripeConfig, None]] = {}
    plans_by_config: dict[TensorConfig, list[Plan]] = {}
    closed_plans: dict[int, list[Plan]] = {}
    for part in ctx.graph.parts:
        stripe_configs = generate_output_stripe_configs(
            part,
            options.stripe_factors,
            options.enable_striping,
            options.enable_multi_dimensional_striping,
        )
        stripe_configs.extend(connecting.get(part.output.id, ()))
        single_consumer = len(part.output.consumers) == 1
        tensor_id = part.output.id
        # (part group -> open configs -> candidates (memory, cycles, plan, consumer or None))
        buckets: dict[int, dict[tuple[TensorConfig, ...], list[tuple]]] = {}
        join_data: dict[TensorConfig, list[tuple]] = {}
        # The same candidate lists keyed by (part group, open configs): one lookup per merge.
        flat: dict[tuple[int, tuple[TensorConfig, ...]], list[tuple]] = {}

        joinable = plans_by_config.__contains__ if single_consumer else _never
        for plan in generate_single_plans(part, stripe_configs, ctx, joinable):
            output = plan.output_config
            if output.state != INTERIOR:
                entry = (plan.memory_usage, plan.cycles, plan, None)
                buckets.setdefault(plan.part_group, {}).setdefault(plan.open_configs, []).append(
                    entry
                )
                continue
            if not single_consumer:
                continue
            joins = join_data.get(output)
            if joins is None:
                joins = [
                    (j.memory_usage, j.cycles, j.part_group, j.open_configs_without(tensor_id), j)
                    for j in plans_by_config.get(output, ())
                    if j.part_group.bit_count() < options.max_plan_size
                ]
                join_data[output] = joins
            limit = region_size - plan.memory_usage
            memory, cycles, group, mine = (
                plan.memory_usage,
                plan.cycles,
                plan.part_group,
                plan.open_configs[:-1],
            )
            for join_memory, join_cycles, join_group, rest, join in joins:
                if join_memory < limit:
                    key = (group | join_group, mine + rest)
                    entries = flat.get(key)
                    if entries is None:
                        entries = flat[key] = []
                        buckets.setdefault(key[0], {})[key[1]] = entries
                    entries.append((memory + join_memory, cycles + join_cycles, plan, join))
        for group, by_open in buckets.items():
            for open_configs, entries in by_open.items():
                if open_configs:
                    kept = cull_plans(entries, options.max_open_plans, options.disable_pareto_plans)
                else:
                    kept = _cull_closed(entries, options)
                plans = [
                    plan
                    if join is None
                    else Plan(
                        None,
                        open_configs,
                        join.output_config,
                        group,
                        cascade,
                        memory,
                        cycles,
                        (plan, join),
                    )
                    for memory, cycles, plan, join in kept
                ]
                if not open_configs:
                    closed_plans[group] = plans
                    continue
                for plan in plans:
                    for config in open_configs:
                        if config is plan.output_config:
                            continue
                        for stripe_config in config.stripe_configs:
                            if stripe_config.stripe_count > 1:
                                connecting.setdefault(config.tensor.id, {})[stripe_config] = None
                        plans_by_config.setdefault(config, []).append(plan)
    return closed_plans
