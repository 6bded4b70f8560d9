"""The costing context of plan generation: the regions, homes and options of one cascader
run, and what a plan pays for its tensors under either cost model (`tvm`, the original's,
or `vela`, Vela's performance model's)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from cascader.core.costs import AccessCosts, BlockCosts
from cascader.core.floats import f32
from cascader.core.graph import CascaderGraph
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.part import BufferMode, Part, op_before
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


class AreaTerms(NamedTuple):
    """What the "vela" cost of one output stripe shape needs of the areas of a run's area
    sets (leading axis): access cycles per byte per (block config, slot) as counted
    (`factors`) and as the block choice weighs them (`choices`), the (slot, region) matrix
    sending each slot's cycles to its region, the main input's block fetch cycles per block
    config for a part with per-command overhead (else None) and the scale-bias read
    latency per area set (None without constants)."""

    factors: np.ndarray
    matrices: np.ndarray
    choices: np.ndarray
    ifm_block: np.ndarray | None
    bias_latency: np.ndarray | None


@dataclass
class _SystemMemos:
    """The caches of plan contexts that depend on the graph, its regions and the cascade
    region alone, not on a run's options: shared by a sweep's cascader runs on one graph."""

    efficiency: dict = field(default_factory=dict)
    slack: dict = field(default_factory=dict)
    area_arrays: dict = field(default_factory=dict)
    region_matrices: dict = field(default_factory=dict)
    access: dict = field(default_factory=dict)
    vela_rows: dict = field(default_factory=dict)


def _system_memos(
    graph: CascaderGraph, regions: dict[str, MemoryRegion], cascade: str
) -> _SystemMemos:
    """The graph's memos for these regions (`CascaderGraph.run_memos`; new ones, not kept,
    with the caches off)."""
    key = (tuple(regions.items()), cascade)
    found = graph.run_memos.lookup(key)
    if found is None:
        found = _SystemMemos()
        graph.run_memos.keep(key, found)
    return found


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
    # How the "vela" model counts a whole output laid over the input it consumes
    # (`core.overlay.LAYINGS`); `cascade`'s `laying`.
    laying: str = "turned"
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
        access cycles) as the part counts them (`Part.access_costs`), first on ties. A
        part whose block commands carry an overhead (`Part.ifm_block_bytes`) has it counted
        in its compute (`Part.command_bound`), with the IFM read from the first input's
        area. All go through one set of array operations, each (config, area set) with the
        operations it gets alone."""
        costs = [
            part.block_costs(config, mode) for config, mode in zip(configs, modes, strict=True)
        ]
        terms = self._area_terms(part, configs, costs, out_area, area_sets)
        # Per (config, area set, block config, slot or region).
        moved = np.stack([cost.moved_bytes for cost in costs])[:, None]
        factors = np.stack([term.factors for term in terms])
        matrices = terms[0].matrices
        access = (moved * factors) @ matrices
        compute = chosen_by = np.stack([cost.compute_cycles for cost in costs])[:, None]
        if terms[0].ifm_block is not None:
            ifm_block = np.stack([term.ifm_block for term in terms])
            out = self.regions[out_area]
            compute, chosen_by = part.command_bound(
                configs,
                modes,
                ifm_block,
                factors[:, 0, :, -1],
                out.write_latency,
                terms[0].bias_latency,
            )
        chosen_access = (moved * np.stack([term.choices for term in terms])) @ matrices
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
    ) -> list[AreaTerms]:
        """`AreaTerms` per config of `configs` (`costs`: their block costs), for the areas of
        `area_sets`. They depend on the stripe shape, not the stripe counts; the shapes not
        seen yet are worked out together, each (slot, area) pair once for all of them."""
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
        matrices, bias_latency = self._area_matrices(out_area, area_sets)
        blocks = len(costs[0].compute_cycles)

        def access(slot: int, area: str | None) -> AccessCosts:
            """(config, block config) cycles per byte of `slot` moved in `area`."""
            found = [
                self._access(part, config, cost, slot, area)
                for config, cost in zip(configs, costs, strict=True)
            ]
            counted = np.stack([one.counted for one in found])
            if all(one.chosen_by is one.counted for one in found):
                return AccessCosts(counted, counted)
            return AccessCosts(counted, np.stack([one.chosen_by for one in found]))

        columns: dict[tuple[int, str | None], AccessCosts] = {}
        order = []
        for areas, _ in area_sets:
            for pair in enumerate((*areas, out_area)):
                if pair not in columns:
                    columns[pair] = access(*pair)
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
        fetched = [part.ifm_block_bytes(config) for config in configs]
        if fetched[0] is not None:
            ifm_bytes = np.stack(fetched)
            by_area: dict[str, np.ndarray] = {}
            for areas, _ in area_sets:
                area = areas[0] or self.cascade
                if area not in by_area:
                    per_byte = (columns[(0, area)] if (0, area) in columns else access(0, area))[0]
                    by_area[area] = self.regions[area].read_latency + ifm_bytes * per_byte
            ifm_block = np.stack([by_area[areas[0] or self.cascade] for areas, _ in area_sets], 1)
        for index, key in enumerate(keys):
            self._memos.area_arrays[key] = AreaTerms(
                factors[index], matrices, choices[index], ifm_block[index], bias_latency
            )

    def _area_matrices(
        self, out_area: str, area_sets: tuple[tuple[tuple[str | None, ...], str | None], ...]
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Per area set: the (slot, region) 0/1 matrix sending each slot's access cycles to
        its region; and the scale-bias read latency (None without constants)."""
        key = (out_area, area_sets)
        found = self._memos.region_matrices.get(key)
        if found is None:
            latency = None
            if area_sets[0][1] is not None:
                latency = np.array(
                    [self.regions[c].read_latency for _, c in area_sets], dtype=np.float64
                )
            matrices = np.stack([self._region_matrix((*a, out_area)) for a, _ in area_sets])
            found = self._memos.region_matrices[key] = (matrices, latency)
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

    def _access(
        self, part: Part, config: StripeConfig, costs: BlockCosts, slot: int, area: str | None
    ) -> AccessCosts:
        """`Part.access_costs` of input `slot` (the output for slot = number of inputs) of
        `part` in area `area` (None: not counted, zero), kept per stripe shape across the
        graph's runs."""
        key = (part.id, config.shape, slot, area)
        found = self._memos.access.get(key)
        if found is None:
            if area is None:
                zeros = np.zeros(len(costs.compute_cycles))
                found = AccessCosts(zeros, zeros)
            else:
                found = part.access_costs(costs, config.shape, slot, self.regions[area])
            self._memos.access[key] = found
        return found

    def efficiency(self, tensor: Tensor, block_shape: tuple[int, ...], region: str) -> float:
        key = (tensor.id, block_shape, region)
        found = self._memos.efficiency.get(key)
        if found is None:
            found = transfer_efficiency(tensor, block_shape, self.regions[region])
            self._memos.efficiency[key] = found
        return found
