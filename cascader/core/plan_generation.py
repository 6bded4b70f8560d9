"""Plan generation: single-part plans for each candidate stripe config, then whole-graph plans
by merging open plans along the graph in reverse topological order."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from cascader.core.floats import f32
from cascader.core.graph import CascaderGraph
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.pareto import cull_plans
from cascader.core.part import BlockCosts, BufferMode, Part
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


# Vela's IFM blocks are a whole number of IFM micro-blocks deep (8 on every Ethos-U55/U65).
IFM_DEPTH_GRANULE = 8


def vela_efficiency(
    tensor: Tensor, block_shape: tuple[int, ...], region: MemoryRegion, is_read: bool
) -> float:
    """Vela's burst-efficiency multiplier (npu_performance._estimate_memory_transfer_efficiency,
    one NPU core) for a feature map moved in blocks of `block_shape`: NHWC reads burst one
    block depth (a whole block row only for depth-1 blocks), writes at most 16 elements;
    NHCWB16 (5-D tensors) moves 16-deep bricks one block row at a time."""
    element = tensor.dtype_bytes
    if len(tensor.shape) == 5:
        width = block_shape[3] if len(block_shape) == 5 else block_shape[2]
        burst = 16 * element * width
    else:
        depth, width = block_shape[-1], block_shape[-2] if len(block_shape) > 1 else 1
        if is_read:  # the block configs clip the IFM block to the tensor; Vela does not
            depth = -(-depth // IFM_DEPTH_GRANULE) * IFM_DEPTH_GRANULE
        if depth == element and (is_read or depth <= 16):
            burst = element * depth * width
        elif is_read:
            burst = element * depth
        else:
            burst = min(64, 16 * element, depth * element)
    return region.burst_length / min(region.burst_length, max(burst, 1))


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
    _vela_copy: dict = field(default_factory=dict)
    _vela_costs: dict = field(default_factory=dict)
    _region_matrices: dict = field(default_factory=dict)
    _per_byte: dict = field(default_factory=dict)

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

    def vela_copy(self, config: TensorConfig) -> float:
        """DMA cycles of copying a tensor into its copy region, stripe by stripe as far as
        the previous stripe does not already hold it: Vela's mem2mem time, the slower of
        reading the home region and writing the copy region. Vela counts the copied bytes,
        but not in the regions' access cycles."""
        found = self._vela_copy.get(config.id)
        if found is None:
            home, copy = self.regions[config.home_region], self.regions[config.copy_region]
            moved = sum(
                math.prod(shape) * count
                for stripe_config in config.stripe_configs
                for shape, count in count_stripes(stripe_config, sliding=True)
            )
            moved *= config.tensor.dtype_bytes * config.tensor.compression_ratio
            found = max(moved / home.read_bandwidth, moved / copy.write_bandwidth)
            self._vela_copy[config.id] = found
        return found

    def vela_cost(
        self, part: Part, config: StripeConfig, mode: BufferMode, areas: tuple[str, ...]
    ) -> tuple[float, tuple[float, ...]]:
        """(compute cycles, access cycles per region in `regions` order) of `part` producing
        `config` with its inputs read from and its output written to the regions `areas`
        (inputs, then output), under the block config Vela's model runs fastest there: the
        smallest max(compute, each region's access cycles), first on ties."""
        key = (part.id, config, mode, areas)
        found = self._vela_costs.get(key)
        if found is not None:
            return found
        costs = part.block_costs(config, mode)
        factors = np.stack(
            [self._cycles_per_byte(part, costs, slot, area) for slot, area in enumerate(areas)],
            axis=1,
        )
        access = (costs.moved_bytes * factors) @ self._region_matrix(areas)
        total = np.maximum(costs.compute_cycles, access.max(axis=1))
        best = int(np.argmin(total))
        found = (float(costs.compute_cycles[best]), tuple(access[best].tolist()))
        self._vela_costs[key] = found
        return found

    def _region_matrix(self, areas: tuple[str, ...]) -> np.ndarray:
        """(slots, regions) 0/1 matrix sending each slot's access cycles to its region."""
        found = self._region_matrices.get(areas)
        if found is None:
            names = list(self.regions)
            found = np.zeros((len(areas), len(names)))
            for slot, area in enumerate(areas):
                found[slot, names.index(area)] = 1.0
            self._region_matrices[areas] = found
        return found

    def _cycles_per_byte(self, part: Part, costs: BlockCosts, slot: int, area: str) -> np.ndarray:
        """Access cycles per byte of input `slot` (the output for slot = number of inputs)
        of `part` moved in region `area`, per block config: Vela's burst efficiency over the
        region's bandwidth (constants move at full bandwidth)."""
        key = (part.id, slot, area)
        found = self._per_byte.get(key)
        if found is None:
            is_read = slot < len(part.inputs)
            tensor = part.inputs[slot] if is_read else part.output
            region = self.regions[area]
            bandwidth = region.read_bandwidth if is_read else region.write_bandwidth
            found = (
                np.array(
                    [
                        1.0
                        if tensor.is_constant
                        else vela_efficiency(tensor, shapes[0 if is_read else 1], region, is_read)
                        for shapes in costs.block_shapes
                    ]
                )
                / bandwidth
            )
            self._per_byte[key] = found
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
    if ctx.options.cost_model == "vela":
        return _vela_single_plans(part, output_stripe_configs, ctx, joinable)
    plans: list[Plan] = []
    group = 1 << part.id
    cascade = ctx.cascade
    regions = ctx.regions
    for output_stripe_config, input_stripe_configs, outputs, wanted in _stripe_choices(
        part, output_stripe_configs, ctx, joinable
    ):
        rolling = part.performance_info(output_stripe_config, ROLLING)
        recompute = part.performance_info(output_stripe_config, RECOMPUTE)
        # Per input option: (config, memory, copy cycles, first-copy cycles, read cycles for
        # a ROLLING output, read cycles for a RECOMPUTE output).
        options = []
        for i, (sc, tensor) in enumerate(zip(input_stripe_configs, part.inputs, strict=True)):
            choices = []
            for config in ctx.input_configs(sc, tensor):
                copy_total, copy_initial = ctx.copy_cycles(config) if config.copy_tensor else (0, 0)
                memory = _input_memory(config, cascade)
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


def _stripe_choices(
    part: Part,
    output_stripe_configs: list[StripeConfig],
    ctx: PlanContext,
    joinable: Callable[[TensorConfig], bool] | None,
) -> Iterator[tuple[StripeConfig, tuple[StripeConfig, ...], list[TensorConfig], list[bool]]]:
    """Per output stripe config of `part` worth planning: its input stripe configs, its
    output configs and which of them to build plans for (see `generate_single_plans`)."""
    part.prepare_costs(output_stripe_configs)
    for output_stripe_config in output_stripe_configs:
        outputs = ctx.output_configs(output_stripe_config, part.output)
        wanted = [out.state == BOUNDARY or joinable is None or joinable(out) for out in outputs]
        if any(wanted):
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
    """`generate_single_plans` under the "vela" cost model: a plan costs what Vela's
    performance model charges the op (npu_performance): the largest of its compute cycles,
    its DMA copies into the cascade region (Vela prefetches them under the previous op or
    double-buffers them, so they overlap compute rather than add to it) and each memory
    region's access cycles (the bytes the NPU reads and writes there, feature maps scaled by
    Vela's burst efficiency, over the region's bandwidth)."""
    plans: list[Plan] = []
    group = 1 << part.id
    cascade = ctx.cascade
    for output_stripe_config, input_stripe_configs, outputs, wanted in _stripe_choices(
        part, output_stripe_configs, ctx, joinable
    ):
        options = [
            [
                (
                    config,
                    _input_memory(config, cascade),
                    ctx.vela_copy(config) if config.copy_tensor else 0.0,
                )
                for config in ctx.input_configs(sc, tensor)
            ]
            for sc, tensor in zip(input_stripe_configs, part.inputs, strict=True)
        ]
        for combo in _combinations(options):
            inputs = tuple(c[0] for c in combo)
            open_inputs = tuple(c for c in inputs if c.state == INTERIOR)
            input_memory = sum(c[1] for c in combo)
            dma = sum(c[2] for c in combo)
            areas = tuple(c.copy_region for c in inputs)
            tensor_configs = inputs
            for out, keep in zip(outputs, wanted, strict=True):
                tensor_configs = (*tensor_configs, out)
                if not keep:
                    continue
                compute, access = ctx.vela_cost(
                    part, output_stripe_config, out.buffer_mode, (*areas, out.copy_region)
                )
                cycles = int(max(compute, dma, *access))
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
