"""The costing context of plan generation: the regions, homes and options of one cascader
run, and what a plan pays for its tensors under either cost model (`tvm`, the original's,
or `vela`, Vela's performance model's)."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from cascader.core.floats import f32
from cascader.core.graph import CascaderGraph
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.part import BlockCosts, BufferMode, Part, op_before
from cascader.core.stripe_config import StripeConfig, count_stripes
from cascader.core.tensor import Tensor
from cascader.core.tensor_config import TensorConfig, TensorConfigState, TensorConfigTable

BOUNDARY = TensorConfigState.BOUNDARY
INTERIOR = TensorConfigState.INTERIOR
RECOMPUTE = BufferMode.RECOMPUTE
ROLLING = BufferMode.ROLLING
_MODES = (RECOMPUTE, ROLLING)  # an INTERIOR output's configs, in the original's order


def per_cycle(nbytes: int, bandwidth: float) -> int | float:
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
    if len(tensor.shape) == 5:  # an inline part's one-axis block moves nothing: any width
        width = block_shape[3] if len(block_shape) == 5 else (*block_shape, 1, 1)[2]
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


def vela_efficiencies(
    tensor: Tensor,
    blocks: tuple[tuple[int, ...], ...] | np.ndarray,
    region: MemoryRegion,
    is_read: bool,
) -> np.ndarray:
    """`vela_efficiency` of every block shape of `blocks` at once (a list of blocks of one
    rank; each entry's arithmetic as `vela_efficiency` does it, so the values are equal)."""
    shapes = np.asarray(blocks, dtype=np.int64).reshape(len(blocks), -1)
    rank = shapes.shape[1]
    element = tensor.dtype_bytes
    if len(tensor.shape) == 5:
        widths = shapes[:, 3 if rank == 5 else 2] if rank > 2 else np.ones(len(blocks), np.int64)
        burst = 16 * element * widths
    else:
        depth = shapes[:, -1]
        width = shapes[:, -2] if rank > 1 else np.ones(len(blocks), dtype=np.int64)
        if is_read:
            depth = -(-depth // IFM_DEPTH_GRANULE) * IFM_DEPTH_GRANULE
        whole_rows = (depth == element) & (is_read | (depth <= 16))
        burst = np.where(
            whole_rows,
            element * depth * width,
            element * depth if is_read else np.minimum(min(64, 16 * element), depth * element),
        )
    length = region.burst_length
    return length / np.minimum(length, np.maximum(burst, 1))


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
class _SystemMemos:
    """The caches of plan contexts that depend on the graph, its regions and the cascade
    region alone, not on a run's options: shared by a sweep's cascader runs on one graph."""

    efficiency: dict = field(default_factory=dict)
    slack: dict = field(default_factory=dict)
    area_arrays: dict = field(default_factory=dict)
    region_matrices: dict = field(default_factory=dict)
    per_byte: dict = field(default_factory=dict)
    burst: dict = field(default_factory=dict)
    vela_rows: dict = field(default_factory=dict)


# Per graph, per (regions, cascade region): the graph's runs' system memos. Weakly keyed, so
# a graph's memos go with it.
_SYSTEM_MEMOS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _system_memos(
    graph: CascaderGraph, regions: dict[str, MemoryRegion], cascade: str
) -> _SystemMemos:
    by_system = _SYSTEM_MEMOS.setdefault(graph, {})
    return by_system.setdefault((tuple(regions.items()), cascade), _SystemMemos())


@dataclass
class PlanContext:
    """Everything plan generation shares across parts: regions, homes, options, the interned
    tensor configs and the per-config caches. The caches that only depend on the graph and
    its regions carry over from the graph's earlier runs (see `_SystemMemos`); those that
    hold this run's tensor configs start empty."""

    graph: CascaderGraph
    regions: dict[str, MemoryRegion]
    home_map: dict[int, list[str]]
    options: CascaderOptions
    table: TensorConfigTable = field(default_factory=TensorConfigTable)
    _inputs: dict = field(default_factory=dict)
    _copy: dict = field(default_factory=dict)
    _vela_copy: dict = field(default_factory=dict)
    _constant_copy: dict = field(default_factory=dict)
    _tilings: dict = field(default_factory=dict)

    _memos: _SystemMemos = field(init=False)

    def __post_init__(self) -> None:
        self._memos = _system_memos(self.graph, self.regions, self.cascade)

    @property
    def cascade(self) -> str:
        return self.options.cascade_region

    def input_configs(self, config: StripeConfig, tensor: Tensor) -> list[TensorConfig]:
        """Ways an input can be provided: BOUNDARY in each home region (read in place if homed
        in the cascade region or too big to copy; copied to the cascade region otherwise) and,
        for non-constants, INTERIOR in the cascade region, recomputed or rolling. Which
        kinds of configs there are depends on the tensor alone, not on `config` (the "vela"
        single plans work out what only depends on the kinds once per part)."""
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

    def output_configs(
        self,
        config: StripeConfig,
        tensor: Tensor,
        joinable: Callable[[TensorConfig], bool] | None = None,
    ) -> list[TensorConfig]:
        """BOUNDARY in each home region when stripes do not overlap, plus INTERIOR recomputed
        or rolling in the cascade region. With `joinable`, the list ends at its last config
        worth a plan: a BOUNDARY one or an INTERIOR one `joinable` accepts (a plan holds the
        configs before its output too). An INTERIOR config a consumer's plan waits for was
        made by that plan's input configs, so one not in the table yet is not worth making:
        most output stripe configs of a multi-dimensional run have none."""
        cascade, stripes, table = self.cascade, (config,), self.table
        configs = []
        if config.non_overlapping:
            for home in self.home_map[tensor.id]:
                configs.append(table.get(tensor, home, BOUNDARY, RECOMPUTE, stripes, False, home))
        interior = [(tensor, cascade, INTERIOR, mode, stripes, False, cascade) for mode in _MODES]
        if joinable is None:
            return configs + [table.get(*key) for key in interior]
        found = [table.find(key) for key in interior]
        worth = [i + 1 for i, c in enumerate(found) if c is not None and joinable(c)]
        last = worth[-1] if worth else 0
        pairs = zip(found[:last], interior[:last], strict=True)
        return configs + [c or table.get(*key) for c, key in pairs]

    def copy_cycles(self, config: TensorConfig) -> tuple[int, int]:
        found = self._copy.get(config.id)
        if found is None:
            found = copy_cycles_hint(config, self.regions)
            self._copy[config.id] = found
        return found

    def vela_copy(self, config: TensorConfig) -> float:
        """DMA cycles of copying a tensor into its copy region: Vela's mem2mem time, the slower
        of reading the home region and writing the copy region. A feature map is copied as
        the schedule copies it, each stripe whole into the one buffer the op reads, each copy
        paying the home region's latency; a constant operand stripe by stripe as far as the
        previous stripe does not already hold it. Vela counts the copied bytes, but not in the
        regions' access cycles."""
        found = self._vela_copy.get(config.id)
        if found is None:
            home, copy = self.regions[config.home_region], self.regions[config.copy_region]
            bytes_per = config.tensor.dtype_bytes * config.tensor.compression_ratio
            constant = config.tensor.is_constant
            latency = 0 if constant else home.read_latency
            found = 0.0
            for stripe_config in config.stripe_configs:
                for shape, count in count_stripes(stripe_config, sliding=constant):
                    moved = math.prod(shape) * bytes_per
                    slower = max(moved / home.read_bandwidth, moved / copy.write_bandwidth)
                    found += count * (latency + slower)
            self._vela_copy[config.id] = found
        return found

    def constant_copy_bytes(
        self, config: TensorConfig, ratio: float, stream_bytes: int
    ) -> tuple[float, float]:
        """(all, first stripe's) bytes the schedule DMA-copies of a constant: each slice
        once (a stripe reading the slice its buffer holds copies nothing), the first before
        the op's first stripe; each slice encoded at `ratio` times the tensor's own
        compression, as its own stream of `stream_bytes` more."""
        found = self._constant_copy.get(config.id)
        if found is None:
            tensor = config.tensor
            scale = tensor.dtype_bytes * tensor.compression_ratio * ratio
            stripes = [
                (math.prod(shape), count)
                for stripe_config in config.stripe_configs
                for shape, count in count_stripes(stripe_config, sliding=True)
            ]
            total = sum((size * scale + stream_bytes) * count for size, count in stripes)
            first = config.stripe_configs[0]
            first_bytes = math.prod(
                max(min(s, e - max(o, 0)), 0)
                for s, e, o in zip(first.shape, first.extent, first.offset, strict=True)
            )
            found = (total, first_bytes * scale + stream_bytes)
            self._constant_copy[config.id] = found
        return found

    def mem2mem(self, source: str, dest: str, nbytes: float) -> float:
        """Vela's DMA time (npu_performance.measure_mem2mem_cycles): the slower of reading
        `source` (plus its read latency) and writing `dest`."""
        home, copy = self.regions[source], self.regions[dest]
        read = nbytes // home.read_bandwidth + home.read_latency
        return max(read, nbytes // copy.write_bandwidth)

    def copy_slack(self, part: Part) -> float:
        """Compute cycles of the op that runs just before `part` (the producer of its first
        input, whole, with the block config it computes fastest; 0 for a graph input): the
        evaluator hides the first weight copy of an op under them, as Vela prebuffers it
        there. (A producer that itself streams weight slices leaves only its last slice, and
        reading its constants from slow memory raises its compute; which it does is the
        producer's plan's choice, unknown here.)"""
        found = self._memos.slack.get(part.id)
        if found is None:
            found = 0.0
            producer = op_before(part)
            if producer is not None:
                shape = producer.output.shape
                whole = StripeConfig(shape, shape, shape, tuple(range(1, len(shape) + 1)),
                                     (1,) * len(shape), (0,) * len(shape))  # fmt: skip
                found = float(producer.block_costs(whole, RECOMPUTE).compute_cycles.min())
            self._memos.slack[part.id] = found
        return found

    def vela_costs(
        self,
        part: Part,
        configs: list[StripeConfig],
        modes: list[BufferMode],
        out_area: str,
        area_sets: tuple[tuple[tuple[str | None, ...], str | None], ...],
    ) -> tuple[np.ndarray, np.ndarray]:
        """`_vela_costs`, remembered per (config, mode, area set) across the graph's runs:
        a sweep's runs with other options (copy sizes, stripe factors) ask again for most of
        the same configs, with area sets of their own. Each row is as computed alone, so a
        remembered one is what a fresh batch would give."""
        rows = self._memos.vela_rows
        pairs = zip(configs, modes, strict=True)
        keys = [[(part.id, c, m, out_area, a) for a in area_sets] for c, m in pairs]
        missing = [i for i, row in enumerate(keys) if any(k not in rows for k in row)]
        if missing:
            compute, access = self._vela_costs(
                part, [configs[i] for i in missing], [modes[i] for i in missing], out_area,
                area_sets,
            )  # fmt: skip
            for index, i in enumerate(missing):
                for slot, key in enumerate(keys[i]):
                    rows[key] = (compute[index, slot], access[index, slot])
        found = [[rows[k] for k in row] for row in keys]
        return (
            np.array([[c for c, _ in row] for row in found]),
            np.array([[a for _, a in row] for row in found]),
        )

    def _vela_costs(
        self,
        part: Part,
        configs: list[StripeConfig],
        modes: list[BufferMode],
        out_area: str,
        area_sets: tuple[tuple[tuple[str | None, ...], str | None], ...],
    ) -> tuple[np.ndarray, np.ndarray]:
        """(compute cycles per (config, area set), access cycles per (config, area set,
        region in `regions` order)) of `part` producing each of `configs` (its output in
        the buffer mode at the same position of `modes`) with its output written to
        `out_area` and, per entry (areas, const_area) of `area_sets`, its inputs read from
        the regions `areas` (None: not counted) and its scale-bias read from `const_area`
        (None in every entry for a part without constants, in none otherwise), under the
        block config the schedule picks there: the smallest max(compute, each region's
        access cycles) as Vela's model counts them, first on ties. A part that knows Vela's
        per-block command overhead (`command_bound_batch`) has it counted in its compute,
        with the IFM read from the first input's area. All go through one set of array
        operations, each (config, area set) with the operations it gets alone."""
        costs = [
            part.block_costs(config, mode) for config, mode in zip(configs, modes, strict=True)
        ]
        terms = self._area_terms(part, configs, costs, out_area, area_sets)
        # Per (config, area set, block config, slot or region).
        moved = np.stack([cost.moved_bytes for cost in costs])[:, None]
        factors = np.stack([term[0] for term in terms])
        matrices = terms[0][1]
        access = (moved * factors) @ matrices
        compute = chosen_by = np.stack([cost.compute_cycles for cost in costs])[:, None]
        bound = getattr(part, "command_bound_batch", None)
        if bound is not None:
            ifm_block = np.stack([term[3] for term in terms])
            out = self.regions[out_area]
            bounds = bound(
                configs, modes, ifm_block, factors[:, 0, :, -1], out.write_latency, terms[0][4]
            )
            compute, chosen_by = bounds[0], bounds[-1]
        chosen_access = (moved * np.stack([term[2] for term in terms])) @ matrices
        best = np.argmin(np.maximum(chosen_by, np.maximum.reduce(chosen_access, axis=3)), axis=2)
        compute = np.broadcast_to(compute, access.shape[:3])
        return (
            np.take_along_axis(compute, best[..., None], axis=2)[..., 0],
            np.take_along_axis(access, best[..., None, None], axis=2)[:, :, 0],
        )

    def _area_terms(
        self,
        part: Part,
        configs: list[StripeConfig],
        costs: list[BlockCosts],
        out_area: str,
        area_sets: tuple[tuple[tuple[str | None, ...], str | None], ...],
    ) -> list[tuple]:
        """What `vela_costs` needs of the areas, per config of `configs` (`costs`: their
        block costs) and area set (leading axis): access cycles per byte per (block config,
        slot), the (slot, region) matrix, the cycles per byte the schedule picks the block
        by (`ethosu.vela_cost.fastest_block` counts weight elements, not encoded bytes, and
        no scale-bias fetch; the evaluator then charges both), the IFM block's fetch cycles
        and the scale-bias read latencies (None without constants). They depend on the
        stripe shape, not the stripe counts; the shapes not seen yet are worked out
        together, each (slot, area) pair once for all of them."""
        keys = [(part.id, config.shape, out_area, area_sets) for config in configs]
        missing: dict[tuple, int] = {}
        for index, key in enumerate(keys):
            if key not in self._memos.area_arrays:
                missing.setdefault(key, index)
        if missing:
            indices = list(missing.values())
            self._new_area_terms(
                part,
                [configs[i] for i in indices],
                [costs[i] for i in indices],
                out_area,
                area_sets,
                list(missing),
            )
        return [self._memos.area_arrays[key] for key in keys]

    def _new_area_terms(
        self,
        part: Part,
        configs: list[StripeConfig],
        costs: list[BlockCosts],
        out_area: str,
        area_sets: tuple[tuple[tuple[str | None, ...], str | None], ...],
        keys: list[tuple],
    ) -> None:
        """`_area_terms` of configs of shapes not seen yet, stored under `keys`."""
        matrices, latencies = self._area_matrices(out_area, area_sets)
        weights = getattr(part, "weight_tensor_idx", -1)
        blocks = len(costs[0].compute_cycles)

        def per_byte(slot: int, area: str | None) -> np.ndarray:
            """(config, block config) cycles per byte of `slot` moved in `area`."""
            return np.stack(
                [
                    self._cycles_per_byte(part, config, cost, slot, area)
                    for config, cost in zip(configs, costs, strict=True)
                ]
            )

        # Per (slot, area) pair: per (config, block config) cycles per byte, as counted
        # and as the block choice sees them.
        columns: dict[tuple[int, str | None], tuple[np.ndarray, np.ndarray]] = {}
        order = []
        for areas, _ in area_sets:
            for pair in enumerate((*areas, out_area)):
                if pair not in columns:
                    slot, area = pair
                    factor = choice = per_byte(slot, area)
                    constant = slot < len(part.inputs) and part.inputs[slot].is_constant
                    if constant and area is not None:
                        picked = 1.0 / self.regions[area].read_bandwidth if slot == weights else 0.0
                        choice = np.full(factor.shape, picked)
                    columns[pair] = (factor, choice)
                order.append(pair)
        # (config, area set, block config, slot), from (config, area set, slot) rows.
        shape = (len(configs), len(area_sets), len(order) // len(area_sets), blocks)
        factors, choices = (
            np.ascontiguousarray(
                np.stack([columns[pair][side] for pair in order], axis=1)
                .reshape(shape)
                .transpose(0, 1, 3, 2)
            )
            for side in (0, 1)
        )
        ifm_block = [None] * len(configs)
        if hasattr(part, "command_bound_batch"):
            ifm_bytes = np.stack([part.ifm_block_bytes(config) for config in configs])
            by_area: dict[str, np.ndarray] = {}
            for areas, _ in area_sets:
                area = areas[0] or self.cascade
                if area not in by_area:
                    factor = columns[(0, area)][0] if (0, area) in columns else per_byte(0, area)
                    by_area[area] = self.regions[area].read_latency + ifm_bytes * factor
            ifm_block = np.stack([by_area[areas[0] or self.cascade] for areas, _ in area_sets], 1)
        for index, key in enumerate(keys):
            self._memos.area_arrays[key] = (
                factors[index],
                matrices,
                choices[index],
                ifm_block[index],
                latencies,
            )

    def _area_matrices(
        self, out_area: str, area_sets: tuple[tuple[tuple[str | None, ...], str | None], ...]
    ) -> tuple[np.ndarray, tuple]:
        """Per area set: the (slot, region) 0/1 matrix sending each slot's access cycles to
        its region; and the scale-bias read latencies (None without constants)."""
        key = (out_area, area_sets)
        found = self._memos.region_matrices.get(key)
        if found is None:
            latencies: tuple = (None,)
            if area_sets[0][1] is not None:
                latencies = (
                    np.array(
                        [self.regions[c].read_latency for _, c in area_sets], dtype=np.float64
                    ),
                    None,
                )
            matrices = np.stack([self._region_matrix((*a, out_area)) for a, _ in area_sets])
            found = self._memos.region_matrices[key] = (matrices, latencies)
        return found

    def tiling(self, config: StripeConfig) -> StripeConfig:
        """The first config seen with `config`'s stripes, whatever its loop order: the
        "vela" cost counts stripes, not the order they run in, so configs that differ only
        in order share their costs (multi-dimensional striping makes many of them)."""
        key = config.key
        return self._tilings.setdefault((*key[:3], *key[4:]), config)

    def _region_matrix(self, areas: tuple[str | None, ...]) -> np.ndarray:
        """(slots, regions) 0/1 matrix sending each slot's access cycles to its region."""
        names = list(self.regions)
        found = np.zeros((len(areas), len(names)))
        for slot, area in enumerate(areas):
            if area is not None:
                found[slot, names.index(area)] = 1.0
        return found

    def _cycles_per_byte(
        self, part: Part, config: StripeConfig, costs: BlockCosts, slot: int, area: str | None
    ) -> np.ndarray:
        """Access cycles per byte of input `slot` (the output for slot = number of inputs)
        of `part` moved in region `area`, per block config (its output blocks as clipped to
        stripes of `config`'s shape): Vela's burst efficiency over the region's bandwidth
        (constants move at full bandwidth, as encoded)."""
        is_read = slot < len(part.inputs)
        key = (part.id, config.shape, slot, area)
        found = self._memos.per_byte.get(key)
        if found is None and area is None:
            found = self._memos.per_byte[key] = np.zeros(len(costs.compute_cycles))
        if found is None:
            tensor = part.inputs[slot] if is_read else part.output
            region = self.regions[area]
            bandwidth = region.read_bandwidth if is_read else region.write_bandwidth
            if tensor.is_constant:
                ratio = tensor.compression_ratio * part_encoding(part, slot)[0]
                found = np.full(len(costs.compute_cycles), ratio / bandwidth)
            else:
                # From the part's block arrays if it offers them: its input blocks, the
                # same for every stripe shape (efficiencies kept per part), or its output
                # blocks clipped to this one; else from the block list, kept per list.
                if is_read:
                    inputs = getattr(part, "input_blocks", None)
                    array = None if inputs is None else inputs()
                    if array is not None:
                        burst_key = (part.id, tensor.id, area)
                        found = self._memos.burst.get(burst_key)
                        if found is None:
                            found = self._memos.burst[burst_key] = (
                                vela_efficiencies(tensor, array, region, True) / bandwidth
                            )
                else:
                    outputs = getattr(part, "output_blocks", None)
                    array = None if outputs is None else outputs(config.shape)
                    if array is not None:
                        found = vela_efficiencies(tensor, array, region, False) / bandwidth
                if found is None:
                    found = self._burst_factors(tensor, costs, area, is_read) / bandwidth
            self._memos.per_byte[key] = found
        return found

    def _burst_factors(
        self, tensor: Tensor, costs: BlockCosts, area: str, is_read: bool
    ) -> np.ndarray:
        """`vela_efficiency` per block config of `costs` (their input or output blocks),
        kept per block list."""
        blocks = tuple(map(itemgetter(0 if is_read else 1), costs.block_shapes))
        key = (tensor.id, blocks, area, is_read)
        found = self._memos.burst.get(key)
        if found is None:
            region = self.regions[area]
            if len(set(map(len, blocks))) == 1:
                found = vela_efficiencies(tensor, blocks, region, is_read)
            else:
                found = np.array([vela_efficiency(tensor, b, region, is_read) for b in blocks])
            self._memos.burst[key] = found
        return found

    def efficiency(self, tensor: Tensor, block_shape: tuple[int, ...], region: str) -> float:
        key = (tensor.id, block_shape, region)
        found = self._memos.efficiency.get(key)
        if found is None:
            found = transfer_efficiency(tensor, block_shape, self.regions[region])
            self._memos.efficiency[key] = found
        return found


def part_encoding(part: Part, slot: int) -> tuple[float, int]:
    """(encoded bytes per byte, bytes per encoded stream) of input `slot` of `part` beyond
    its tensor's compression ratio: the weights' encoding for a part that knows it."""
    if slot == getattr(part, "weight_tensor_idx", -1):
        return part.weight_compression, part.weight_stream_bytes
    return 1.0, 0
