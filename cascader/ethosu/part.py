"""EthosuPart: the cascader's cost of an NPU operation, from its list of valid block configs.

TVM-free: the block configs (shapes and per-block cycles) come with the graph, so the cost is
pure arithmetic. The single-precision truncations follow the original cost model exactly.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from cascader.core.costs import AccessCosts, BlockCosts, CommandBound, PerformanceInfo
from cascader.core.floats import f32
from cascader.core.memory_region import MemoryRegion
from cascader.core.part import BufferMode, Part
from cascader.core.propagator import Propagator
from cascader.core.stripe_config import StripeConfig, axis_stripe_sizes
from cascader.core.tensor import Tensor
from cascader.ethosu.block_config import BlockConfig
from cascader.ethosu.burst import burst_efficiencies, burst_efficiency
from cascader.memo import Memo


def _fit(values: tuple[int, ...], dims: int) -> np.ndarray:
    """`values` cut or zero-padded to `dims` entries (block shapes can carry more axes than a
    2-D output; the original read the missing entries as zero)."""
    out = np.zeros(dims, dtype=np.int64)
    n = min(dims, len(values))
    out[:n] = values[:n]
    return out


def _efficiencies(
    tensor: Tensor, blocks: list[tuple[int, ...]], region: MemoryRegion, is_read: bool
) -> np.ndarray:
    """`burst_efficiency` of each block shape of `blocks`, in one array operation when they
    have as many axes."""
    if len(set(map(len, blocks))) == 1:
        return burst_efficiencies(tensor, tuple(blocks), region, is_read)
    return np.array([burst_efficiency(tensor, b, region, is_read) for b in blocks])


def _single(values: np.ndarray) -> np.ndarray:
    """Doubles rounded to single precision and back, as `f32` rounds one value."""
    return np.asarray(values, dtype=np.float64).astype(np.float32).astype(np.float64)


def _outer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Outer product along the last axis, flattened: (..., m) x (..., n) -> (..., m * n)."""
    product = a[..., :, None] * b[..., None, :]
    return product.reshape(*product.shape[:-2], -1)


# Window elements above which summing only the distinct windows pays for finding them.
_DEDUPLICATE_ABOVE = 1 << 16


def _window_sums(
    offset: np.ndarray,
    stride: np.ndarray,
    length: np.ndarray,
    extent: np.ndarray,
    count: np.ndarray,
) -> np.ndarray:
    """Elements read along one axis by `count` windows of `length` starting at `offset` and
    `stride` apart, each clipped to [0, `extent`) (a window wholly inside reads its full
    length, which the clipped one equals), per row of the arguments."""
    k = np.arange(int(count.max()), dtype=np.int64)
    start = offset[:, None] + k * stride[:, None]
    size = np.minimum(start + length[:, None], extent[:, None]) - np.maximum(start, 0)
    return np.where(k < count[:, None], np.maximum(size, 0), 0).sum(axis=1)


def _axis_window_sums(
    offset: np.ndarray,
    stride: np.ndarray,
    length: np.ndarray,
    extent: np.ndarray,
    count: np.ndarray,
) -> np.ndarray:
    """`_window_sums` of every (stripe shape, block config, input axis) window: `offset`
    per axis, `stride` and `length` per (block config, axis), `extent` per (shape, axis),
    `count` per (shape, block config, axis). Few windows are distinct (block configs share
    their axes' strides and lengths, shapes their extents), so past a size each distinct
    one is summed once, found by a small integer code per window instead of sorting."""
    shape = count.shape
    if count.size * int(count.max()) <= _DEDUPLICATE_ABOVE:
        columns = (offset[None, None, :], stride[None], length[None], extent[:, None], count)
        return _window_sums(*(np.broadcast_to(c, shape).reshape(-1) for c in columns)).reshape(
            shape
        )
    # Each (offset, stride, length) as one integer, in their lexicographic order, numbered
    # by rank (the numbers row-wise unique would give, without its slow structured sort).
    code = np.broadcast_to(offset[None, :], stride.shape).astype(np.int64)
    for column in (stride, length):
        low = int(column.min())
        code = code * (int(column.max()) - low + 1) + (column - low)
    _, block_code = np.unique(code.reshape(-1), return_inverse=True)
    block_code = block_code.reshape(stride.shape)
    extent_low, count_low = int(extent.min()), int(count.min())
    extent_span = int(extent.max()) - extent_low + 1
    count_span = int(count.max()) - count_low + 1
    span = (int(block_code.max()) + 1) * extent_span * count_span
    code = (block_code[None] * extent_span + (extent - extent_low)[:, None]) * count_span
    code = (code + (count - count_low)).reshape(-1)
    if span <= max(4 * len(code), 1 << 20):
        used = np.zeros(span, dtype=bool)
        used[code] = True
        representative = np.empty(span, dtype=np.int64)
        representative[code] = np.arange(len(code))
        first, inverse = representative[used], (np.cumsum(used) - 1)[code]
    else:
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    s, b, a = np.unravel_index(first, shape)
    sums = _window_sums(offset[a], stride[b, a], length[b, a], extent[s, a], count[s, b, a])
    return sums[inverse.reshape(-1)].reshape(shape)


# Ops whose IFM Vela counts block by block (npu_performance.measure_element_access): every
# OFM block fetches one IFM block per sub-kernel, a convolution's across the whole IFM depth
# for each OFM depth block, a depthwise or pooling one across the IFM depth once.
_BLOCK_FETCHED = frozenset({"conv2d", "fully_connected", "depthwise_conv2d", "pooling"})
_WHOLE_IFM_DEPTH = frozenset({"conv2d", "fully_connected"})


class EthosuPart(Part):
    """An NPU operation. Its "tvm" cost for an output stripe shape uses the block config that
    reads the fewest bytes per output element; that choice and its per-input byte counts are
    memoised per stripe shape, computed for all block configs and all the part's stripe
    shapes at once. Its "vela" cost (`block_costs`) counts every block config of
    `vela_block_configs` (default: `block_configs`) as Vela does and leaves the choice to the
    plan, which knows where each tensor lives: Vela chooses among all valid blocks, the small
    ones a culled list drops included."""

    kind = "ethosu"

    def __init__(
        self,
        id: int,
        inputs: list[Tensor],
        output: Tensor,
        propagators: list[Propagator],
        output_quantum: tuple[int, ...],
        subkernels: int,
        block_configs: list[BlockConfig],
        weight_tensor_idx: int = -1,
        stripe_align_hint: tuple[int, ...] | None = None,
        op: str = "",
        vela_block_configs: list[BlockConfig] | None = None,
        weight_compression: float = 1.0,
        weight_stream_bytes: int = 0,
        in_place_slots: tuple[int, ...] = (),
        rows_outermost: bool = True,
    ) -> None:
        super().__init__(
            id, inputs, output, propagators, stripe_align_hint or tuple(output_quantum)
        )
        if not block_configs:
            raise ValueError(f"ethosu part {id} has no block configs")
        self.output_quantum = tuple(output_quantum)
        self.subkernels = int(subkernels)
        self.block_configs = list(block_configs)
        self.vela_block_configs = list(vela_block_configs or block_configs)
        self.weight_tensor_idx = int(weight_tensor_idx)
        # The "vela" model's encoded bytes per weight byte (on top of the tensor's own
        # ratio) and per encoded stream (see cascader.ethosu.graph.weight_encoding).
        self.weight_compression = float(weight_compression)
        self.weight_stream_bytes = int(weight_stream_bytes)
        # The inputs an elementwise output may be written over (see `in_place_input`).
        self.in_place_slots = tuple(in_place_slots)
        # NHWC and NHCWB16 alike store rows outermost; False for an op that writes its
        # whole output before its stripes (a pad's fill).
        self.rows_outermost = rows_outermost
        self.op = op
        # NHCWB16 outputs have 5 axes with width at 3; NHWC has width at 2.
        self._height_idx, self._width_idx = (1, 3) if len(self.output_quantum) == 5 else (1, 2)
        block_dims = max(len(b.output_shape) for b in self.block_configs)
        self._block_out = np.array(
            [_fit(b.output_shape, block_dims) for b in self.block_configs], dtype=np.int64
        )
        vela = self.vela_block_configs
        self._shared_blocks = vela == self.block_configs
        vela_dims = max(len(b.output_shape) for b in vela)
        self._vela_out = np.array([_fit(b.output_shape, vela_dims) for b in vela], dtype=np.int64)
        self._block_in_volume = np.array(
            [math.prod(b.input_shape) for b in self.block_configs], dtype=np.int64
        )
        self._choices: Memo[tuple[int, ...], tuple[int, tuple[int, ...]]] = Memo(
            "EthosuPart.choices"
        )
        self._infos: Memo[tuple, PerformanceInfo] = Memo("EthosuPart.infos")
        self._block_cycles = np.array(
            [(b.compute_cycles, b.output_cycles) for b in vela], dtype=np.int64
        )
        self._block_costs: Memo[tuple[tuple, bool], BlockCosts] = Memo("EthosuPart.block_costs")
        self._has_dpu = self._block_cycles[:, 0] > 0
        self._all_dpu = bool(self._has_dpu.all())
        # Per (stripe tiling, rolls): the per-block terms `command_bound` recombines.
        self._block_terms: Memo[tuple[tuple, bool], tuple] = Memo("EthosuPart.block_terms")
        self._clipped_blocks: Memo[tuple[int, ...], tuple] = Memo("EthosuPart.clipped_blocks")
        # Per shape: blocks x inputs.
        self._reads: Memo[tuple[int, ...], np.ndarray] = Memo("EthosuPart.reads")
        self._ifm_block_bytes: Memo[tuple[int, ...], np.ndarray] = Memo(
            "EthosuPart.ifm_block_bytes"
        )
        # Per (input slot, region name, read bandwidth, burst length): its reads' cycles per
        # byte, the same for every stripe.
        self._input_access: Memo[tuple[int, str, float, int], np.ndarray] = Memo(
            "EthosuPart.input_access"
        )
        self._vela_reads = self._reads if self._shared_blocks else Memo("EthosuPart.vela_reads")
        self._blocks = np.maximum(self._vela_out, 1).astype(np.float64)
        self._block_volume = np.prod(np.maximum(self._vela_out, 1), axis=1)
        self._ifm_stripes: Memo[tuple[int, ...], tuple[int, int, int]] = Memo(
            "EthosuPart.ifm_stripes"
        )
        # Output axes whose clipping shrinks a block's DPU work: the depth (NHCWB16: the
        # bricks and the 16 channels in each).
        self._depth_axes = (2, 4) if len(self.output_quantum) == 5 else (3,)
        self._block_shapes = tuple((tuple(b.input_shape), tuple(b.output_shape)) for b in vela)
        self._block_ifms = tuple(ifm for ifm, _ in self._block_shapes)
        ranks = {len(ifm) for ifm in self._block_ifms}
        self._ifm_array = np.array(self._block_ifms, dtype=np.int64) if len(ranks) == 1 else None
        # Whether every output block shape has all the block array's axes (none padded).
        self._full_blocks = all(len(b.output_shape) == vela_dims for b in vela)
        self._ifm_blocks = np.array(
            [(1, 1, 1, *b.input_shape)[-3:] for b in vela], dtype=np.int64
        )  # (height, width, depth), NHWC
        channels = np.maximum(self._vela_out[:, list(self._depth_axes)], 1)
        self._block_channels = np.prod(channels, axis=1).astype(np.float64)

    def _bytes_read(self, shapes: np.ndarray, all_blocks: np.ndarray) -> np.ndarray:
        """Bytes each block config (rows of `all_blocks`, output shapes) reads per input
        (axes: stripe shapes, block configs, inputs) to produce one stripe of each shape in
        `shapes` (rows), block by block; weights are re-read once per spatial block. All
        shapes and block configs go through one set of array operations, since per-shape
        calls were dominated by numpy overhead."""
        n_blocks, block_dims = all_blocks.shape
        n_shapes, shape_dims = shapes.shape
        safe = np.where(all_blocks == 0, 1, all_blocks)
        fitted = np.zeros((n_shapes, block_dims), dtype=np.int64)
        fitted[:, : min(block_dims, shape_dims)] = shapes[:, :block_dims]
        all_stripes = np.where(all_blocks == 0, 0, -(-fitted[:, None, :] // safe))
        out_dims = self.propagators[0].output_dims
        blocks = np.zeros((n_blocks, out_dims), dtype=np.int64)
        stripes = np.zeros((n_shapes, n_blocks, out_dims), dtype=np.int64)
        used = min(out_dims, block_dims)
        blocks[:, :used] = all_blocks[:, :used]
        stripes[:, :, :used] = all_stripes[:, :, :used]
        extent = np.zeros((n_shapes, out_dims), dtype=np.int64)
        extent[:, : min(out_dims, shape_dims)] = shapes[:, :out_dims]
        result = np.zeros((n_shapes, n_blocks, len(self.propagators)), dtype=np.int64)
        for i, (prop, tensor) in enumerate(zip(self.propagators, self.inputs, strict=True)):
            lin, shift = prop.linear, prop.shift
            in_shape = np.ceil(blocks @ lin.T + shift).astype(np.int64)[None, :, :, None]
            in_extent = np.ceil(extent @ lin.T + shift).astype(np.int64)[:, None, :, None]
            in_stride = np.trunc((blocks @ lin.T).astype(np.float32)).astype(np.int64)
            in_stripes = stripes @ prop.feeds.T
            in_stripes[in_stripes == 0] = 1
            # Per (shape, block config, input axis): the elements the axis' windows read.
            sums = _axis_window_sums(
                np.asarray(prop.offset, dtype=np.int64),
                in_stride,
                in_shape[0, :, :, 0],
                in_extent[:, 0, :, 0],
                in_stripes,
            )
            result[:, :, i] = np.prod(sums, axis=2) * tensor.dtype_bytes
        if self.weight_tensor_idx != -1:
            spatial = all_stripes[:, :, self._height_idx] * all_stripes[:, :, self._width_idx]
            result[:, :, self.weight_tensor_idx] *= spatial
        return result

    def prepare_costs(self, configs: list[StripeConfig], cost_model: str = "tvm") -> None:
        """Choose block configs for all new stripe shapes among `configs` in one batch and,
        for the "vela" cost model, count every block config's bytes read per shape (the
        "tvm" model never asks for those: its plans would pay for the full block list).
        The "vela" `block_costs` are batched by `prepare_block_costs`, once the plans know
        which (config, mode) pairs they cost."""
        steps = [(self._choices, self._choose_blocks)]
        if cost_model == "vela":
            steps.append((self._vela_reads, self._count_vela_reads))
        for known, make in steps:
            by_length: dict[int, dict[tuple[int, ...], None]] = {}
            for config in configs:
                if config.shape not in known:
                    by_length.setdefault(len(config.shape), {})[config.shape] = None
            for shapes in by_length.values():
                make(list(shapes))
        if cost_model == "tvm":
            wanted: dict[tuple, None] = {}
            for config in configs:
                for mode in (BufferMode.ROLLING, BufferMode.RECOMPUTE):
                    key = (config.shape, config.stripes, mode)
                    if key not in self._infos:
                        wanted[key] = None
            self._performance_infos(list(wanted))

    def _count_vela_reads(self, shapes: list[tuple[int, ...]]) -> None:
        """Bytes read per input by every block config of the "vela" list, per shape."""
        array = np.asarray(shapes, dtype=np.int64)
        self._vela_reads.update(zip(shapes, self._bytes_read(array, self._vela_out), strict=True))

    def _choose_blocks(self, shapes: list[tuple[int, ...]]) -> None:
        """Cost = bytes read (input times subkernels, plus weights) per output element, halved
        when the input stripe fits in two input blocks (single buffering); the cheapest block
        config (first on ties) wins for each shape."""
        array = np.asarray(shapes, dtype=np.int64)
        per_input = self._bytes_read(array, self._block_out)
        main = per_input[:, :, 0] * self.subkernels
        other = per_input[:, :, 1] if per_input.shape[2] > 1 else 0
        volume = np.prod(array, axis=1).astype(np.float32)[:, None]
        cost = (main + other).astype(np.float32) / volume
        in_shape = self.propagators[0].propagate_shapes(array.astype(np.float64))
        in_volume = np.prod(in_shape, axis=1)[:, None]
        single_buffered = in_volume <= 2 * self._block_in_volume[None, :]
        cost = np.where(single_buffered, cost / np.float32(2), cost)
        best = np.argmin(cost, axis=1)
        self._reads.update(zip(shapes, per_input, strict=True))
        chosen = per_input[np.arange(len(shapes)), best].tolist()
        for shape, b, row in zip(shapes, best.tolist(), chosen, strict=True):
            self._choices[shape] = (b, tuple(row))

    def block_choice(self, shape: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        """Index of the block config used for stripes of `shape`, and the bytes per input it
        reads per stripe."""
        found = self._choices.get(shape)
        if found is None:
            self._choose_blocks([shape])
            found = self._choices[shape]
        return found

    def block_config(self, config: StripeConfig) -> BlockConfig:
        return self.block_configs[self.block_choice(config.shape)[0]]

    def performance_info(self, config: StripeConfig, mode: BufferMode) -> PerformanceInfo:
        key = (config.shape, config.stripes, mode)
        info = self._infos.get(key)
        if info is None:
            info = self._performance_info(config.shape, config.stripes, mode)
            self._infos[key] = info
        return info

    def _performance_infos(self, keys: list[tuple]) -> None:
        """`performance_info` of many (shape, stripes, mode) keys, each float operation of
        `_performance_info` done on arrays in the same order (values in doubles, rounded to
        single precision where it rounds), for keys whose chosen block and shape have as
        many axes together."""
        groups: dict[tuple[int, int], list] = {}
        for key in keys:
            best, per_stripe = self.block_choice(key[0])
            block = self.block_configs[best]
            groups.setdefault((len(block.output_shape), len(key[0])), []).append(
                (key, block, per_stripe)
            )
        full = self.output.shape
        for (length, rank), group in groups.items():
            shape = np.array([key[0] for key, _, _ in group], dtype=np.float64).reshape(-1, rank)
            stripes = np.array([key[1] for key, _, _ in group], dtype=np.int64).reshape(-1, rank)
            sizes = np.array([b.output_shape for _, b, _ in group], dtype=np.float64)
            rolling = np.array([key[2] != BufferMode.RECOMPUTE for key, _, _ in group])
            num_blocks = np.ones(len(group))
            for i in range(length):
                size = sizes[:, i]
                extent = shape[:, i] if i < rank else np.zeros(len(group))
                count = stripes[:, i] if i < rank else np.zeros(len(group))
                recompute = _single(_single(extent / size) * count)
                whole = _single((full[i] if i < len(full) else 0) / size)
                factor = np.where(rolling, whole, recompute)
                num_blocks = _single(num_blocks * np.maximum(factor, 1.0))
            num_stripes = _single(np.prod(stripes, axis=1).astype(np.float64))
            per_stripe = _single(np.array([p for _, _, p in group], dtype=np.float64))
            read_bytes = np.trunc(_single(num_stripes[:, None] * per_stripe)).astype(np.int64)
            volume = _single(np.prod(sizes, axis=1))
            write_bytes = np.trunc(_single(_single(num_blocks * volume) * self.output.dtype_bytes))
            cycles = np.array([(b.output_cycles, b.compute_cycles) for _, b, _ in group])
            out_cycles, compute_cycles = cycles[:, 0], cycles[:, 1]
            larger = np.where(out_cycles > compute_cycles, out_cycles, compute_cycles)
            smaller = np.where(out_cycles > compute_cycles, compute_cycles, out_cycles)
            total = np.trunc(_single(_single(larger * num_blocks) + smaller)).astype(np.int64)
            for (key, block, _), c, r, w in zip(
                group, total.tolist(), read_bytes.tolist(), write_bytes.tolist(), strict=True
            ):
                self._infos[key] = PerformanceInfo(
                    c, tuple(r), int(w), tuple(block.input_shape), tuple(block.output_shape)
                )

    def _performance_info(
        self, shape: tuple[int, ...], stripes: tuple[int, ...], mode: BufferMode
    ) -> PerformanceInfo:
        best, per_stripe = self.block_choice(shape)
        block = self.block_configs[best]
        block_shape = block.output_shape
        full = self.output.shape
        num_blocks = 1.0
        for i, size in enumerate(block_shape):
            if mode == BufferMode.RECOMPUTE:
                extent = shape[i] if i < len(shape) else 0
                count = stripes[i] if i < len(stripes) else 0
                factor = f32(f32(extent / size) * count)
            else:
                factor = f32((full[i] if i < len(full) else 0) / size)
            num_blocks = f32(num_blocks * max(factor, 1.0))
        num_stripes = f32(math.prod(stripes))
        read_bytes = tuple(int(f32(num_stripes * f32(b))) for b in per_stripe)
        write_bytes = int(
            f32(f32(num_blocks * f32(math.prod(block_shape))) * self.output.dtype_bytes)
        )
        out_cycles, compute_cycles = block.output_cycles, block.compute_cycles
        if out_cycles > compute_cycles:
            cycles = int(f32(f32(out_cycles * num_blocks) + compute_cycles))
        else:
            cycles = int(f32(f32(compute_cycles * num_blocks) + out_cycles))
        return PerformanceInfo(
            cycles, read_bytes, write_bytes, tuple(block.input_shape), tuple(block_shape)
        )

    def block_costs(self, config: StripeConfig, mode: BufferMode) -> BlockCosts:
        # Memoised per (stripe tiling, rolls): a ROLLING output that cannot roll costs the
        # same as a RECOMPUTE one, so both modes share one entry then; configs that differ
        # only in loop order too (Vela counts stripes, not their order).
        key = self._costs_key(config, mode)
        costs = self._block_costs.get(key)
        if costs is None:
            self._vela_block_costs([(key, config)])
            costs = self._block_costs[key]
        return costs

    def costed_mode(self, config: StripeConfig, mode: BufferMode) -> BufferMode:
        """A ROLLING output that cannot roll costs what a RECOMPUTE one does."""
        return BufferMode.ROLLING if self._costs_key(config, mode)[1] else BufferMode.RECOMPUTE

    def _costs_key(self, config: StripeConfig, mode: BufferMode) -> tuple[tuple, bool]:
        rolls = (
            mode == BufferMode.ROLLING
            and config.stripe_count > 1
            and all(
                count == 1 for axis, count in enumerate(config.stripes) if axis != self._height_idx
            )
        )
        key = config.key
        return (*key[:3], *key[4:]), rolls

    def prepare_block_costs(self, configs: list[StripeConfig], modes: list[BufferMode]) -> None:
        """`block_costs` of the pairs the plans cost, in batches (a mode no kept output uses
        costs nothing)."""
        wanted: dict[tuple, StripeConfig] = {}
        for config, mode in zip(configs, modes, strict=True):
            key = self._costs_key(config, mode)
            if key not in self._block_costs:
                wanted.setdefault(key, config)
        if wanted:
            self._vela_block_costs(list(wanted.items()))

    def ifm_block_bytes(self, config: StripeConfig) -> np.ndarray:
        """Bytes of one IFM block per block config, clipped to the IFM of a stripe of
        `config` (what Vela's per-block command waits for); memoised per stripe shape."""
        found = self._ifm_block_bytes.get(config.shape)
        if found is None:
            height, width, depth = self._ifm_stripe(config)
            blocks = self._ifm_blocks
            found = self._ifm_block_bytes[config.shape] = (
                np.minimum(blocks[:, 0], height)
                * np.minimum(blocks[:, 1], width)
                * np.minimum(blocks[:, 2], depth)
                * self.inputs[0].dtype_bytes
            ).astype(np.float64)
        return found

    def _ifm_stripe(self, config: StripeConfig) -> tuple[int, int, int]:
        """(height, width, depth) of the IFM a stripe of `config` reads, within the IFM
        (NHCWB16 in whole bricks; lower-rank shapes fill from the right); memoised per
        stripe shape."""
        found = self._ifm_stripes.get(config.shape)
        if found is None:
            found = self._ifm_stripes[config.shape] = self._stripe_ifm(config)
        return found

    def _stripe_ifm(self, config: StripeConfig) -> tuple[int, int, int]:
        """`_ifm_stripe`, computed."""
        ifm = self.inputs[0]
        needed = self.propagators[0].propagate_shapes(np.array([config.shape], dtype=np.float64))
        shape = np.minimum(needed[0], ifm.shape)
        if len(ifm.shape) == 5:
            return int(shape[1]), int(shape[3]), int(ifm.shape[4] * shape[2])
        _, height, width, depth = (1, 1, 1, *shape.tolist())[-4:]
        return int(height), int(width), int(depth)

    def command_bound(
        self,
        configs: list[StripeConfig],
        modes: list[BufferMode],
        ifm_block_cycles: np.ndarray,
        ofm_cycles_per_byte: np.ndarray,
        ofm_latency: float,
        bias_latency: np.ndarray | None,
    ) -> CommandBound:
        """`block_costs` compute cycles once the memory the op runs in is known, as Vela's
        `_estimate_conv_cycles` charges it per block: the DPU and the output each take at
        least a quarter of the block's command (fetching its IFM block, writing its OFM
        block, latencies included, plus its DPU and output cycles), and the output at least
        the latency-bound scale-bias fetch of its channels. An elementwise op's cycles per
        element are bound the same way.
        For many configs (`modes`: each one's buffer mode) under several plans' areas each:
        `ifm_block_cycles` (the IFM area's read latency plus an IFM block's transfer) per
        (config, plan, block config), `ofm_cycles_per_byte` (the OFM area's write cycles per
        byte) per (config, block config), `ofm_latency` that area's write latency, and
        `bias_latency` the read latency where the NPU reads the scale-biases, per plan (None:
        an op without). Charged with the scale-bias fetch; chosen by without it, as Vela's
        scheduler picks blocks. Configs with as many distinct stripe shapes go through one
        set of array operations, each with the operations it gets alone."""
        bias_latencies = (None,) if bias_latency is None else (bias_latency, None)
        keys = [self._costs_key(config, mode) for config, mode in zip(configs, modes, strict=True)]
        for config, mode in zip(configs, modes, strict=True):
            self.block_costs(config, mode)
        found = [np.empty(ifm_block_cycles.shape) for _ in bias_latencies]
        by_width: dict[int, list[int]] = {}
        for index, key in enumerate(keys):
            by_width.setdefault(len(self._block_terms[key][5]), []).append(index)
        for rows in by_width.values():
            terms = [self._block_terms[keys[index]] for index in rows]
            # Per (config, plan, block config, stripe shape); plans share the block terms.
            dpu, out, n_blocks, out_part, dpu_part = (
                np.stack([term[axis] for term in terms])[:, None] for axis in range(5)
            )
            ifm = ifm_block_cycles[rows]
            per_byte = ofm_cycles_per_byte[rows]
            ofm_bytes = self._block_volume[:, None] * out_part * self.output.dtype_bytes
            fetches = ifm[..., None] + ofm_bytes * per_byte[:, None, :, None] + ofm_latency
            elementwise = None
            if not self._all_dpu:
                written = np.array([term[6] for term in terms], dtype=np.int64)[:, None, None]
                elementwise = self._block_cycles[:, 1].astype(np.float64)
                whole_block = self._block_volume * self.output.dtype_bytes * per_byte + ofm_latency
                elementwise = np.maximum(
                    elementwise, (ifm + whole_block[:, None] + elementwise) / 4
                )
                elementwise = np.ceil(elementwise * written / self._block_volume)
            for entry, latency in enumerate(bias_latencies):
                output = out
                if latency is not None:
                    latency = np.asarray(latency, dtype=np.float64)[:, None, None]
                    bias = 10 * self._block_channels[:, None] * dpu_part * latency / 256
                    output = np.maximum(out, bias)
                command = (fetches + output + dpu) / 4
                busy, output = np.maximum(dpu, command), np.maximum(output, command)
                stripe_cycles = np.maximum(busy, output) * n_blocks + np.minimum(busy, output)
                # One matrix-vector product per (config, plan), as alone.
                cycles = np.array(
                    [
                        [per_plan @ term[5] for per_plan in per_config]
                        for per_config, term in zip(stripe_cycles, terms, strict=True)
                    ]
                )
                if elementwise is not None:
                    cycles = np.where(self._has_dpu, cycles, elementwise)
                found[entry][rows] = cycles
        return CommandBound(found[0], found[-1])

    def _vela_block_costs(self, entries: list[tuple[tuple, StripeConfig]]) -> None:
        """Vela's count (npu_performance) for every block config: each stripe is one NPU
        operation costing max(DPU, output) cycles per block over its own ceil-divided blocks
        plus the smaller of the two once, a block clipped to a smaller stripe doing that
        much less output work (and DPU work when clipped in depth; in height and width the
        DPU's micro-blocks keep it); an elementwise op (no DPU work) costs its output
        cycles per element written, not per whole block. A ROLLING output striped only along
        its height (`sliding`) computes only the rows its predecessor did not; striped along
        other axes it is recomputed, as the flow's schedule runs it. Inputs are read
        as the blocks fetch them (the main input of a convolution or pooling as Vela counts
        it, `_block_fetches`; the weights with the share of their stripe's encoded stream
        overhead); the output is written once per element computed.
        `entries` are (memo key, config) pairs, the key's second entry `sliding`; configs
        whose axes have as many stripe sizes each go through one set of array operations
        (a leading axis of configs), with each config's operations as alone."""
        groups: dict[tuple[int, ...], list] = {}
        for key, config in entries:
            sizes = [
                axis_stripe_sizes(offset, count, int(stride), shape, extent, key[1])
                for offset, count, stride, shape, extent in zip(
                    config.offset,
                    config.stripes,
                    config.strides,
                    config.shape,
                    config.extent,
                    strict=True,
                )
            ]
            groups.setdefault(tuple(map(len, sizes)), []).append((key, config, sizes))
        for group in groups.values():
            self._vela_block_costs_group(group)

    def _vela_block_costs_group(self, group: list[tuple[tuple, StripeConfig, list]]) -> None:
        """`_vela_block_costs` of configs with as many stripe sizes per axis (`group`:
        (memo key, config, per axis {size: stripe count}))."""
        count = len(group)
        # Per config (axis 0), block config (axis 1) and distinct stripe shape (axis 2, the
        # product of each axis' sizes): blocks per stripe, and the fraction of a block's
        # DPU work and of its output elements left when Vela clips the block to a smaller
        # stripe.
        blocks = self._blocks
        used = [sizes[: blocks.shape[1]] for _, _, sizes in group]
        # Axes with one stripe size (most of them) in one go; the others as outer products.
        whole = [axis for axis, by_size in enumerate(used[0]) if len(by_size) == 1]
        size = np.array(
            [[next(iter(axes[axis])) for axis in whole] for axes in used], dtype=np.float64
        ).reshape(count, 1, len(whole))
        whole_blocks = blocks[:, whole]
        clipped = np.minimum(size, whole_blocks) / whole_blocks
        depth = [i for i, axis in enumerate(whole) if axis in self._depth_axes]
        n_blocks = np.prod(np.ceil(size / whole_blocks), axis=2, keepdims=True)
        out_part = np.prod(clipped, axis=2, keepdims=True)
        dpu_part = np.prod(clipped[:, :, depth], axis=2, keepdims=True)
        stripes = np.array(
            [[math.prod(next(iter(axes[axis].values())) for axis in whole)] for axes in used]
        )
        for axis, by_size in enumerate(used[0]):
            if len(by_size) == 1:
                continue
            size = np.array([list(axes[axis]) for axes in used], dtype=np.float64)[:, None, :]
            counts = np.array([list(axes[axis].values()) for axes in used], dtype=np.float64)
            block = blocks[:, axis, None]
            clipped = np.minimum(size, block) / block
            n_blocks = _outer(n_blocks, np.ceil(size / block))
            out_part = _outer(out_part, clipped)
            dpu_part = _outer(
                dpu_part, clipped if axis in self._depth_axes else np.ones_like(clipped)
            )
            stripes = _outer(stripes, counts)
        dpu = self._block_cycles[:, 0, None] * dpu_part
        out = self._block_cycles[:, 1, None] * out_part
        per_block = np.maximum(dpu, out)
        stripe_cycles = per_block * n_blocks + np.minimum(dpu, out)
        written = [
            math.prod(sum(n * c for n, c in by_size.items()) for by_size in sizes)
            for _, _, sizes in group
        ]
        written_array = np.array(written, dtype=np.int64)[:, None]
        # One matrix-vector product per config, as alone.
        cycles = np.stack([s @ v for s, v in zip(stripe_cycles, stripes, strict=True)])
        if not self._all_dpu:
            cycles = np.where(
                self._has_dpu,
                cycles,
                np.ceil(self._block_cycles[:, 1] * written_array / self._block_volume),
            )
        reads = np.stack([self._reads_of(config.shape) for _, config, _ in group])
        read = reads * np.array([float(math.prod(c.stripes)) for _, c, _ in group])[:, None, None]
        read[:, :, 0] *= self.subkernels
        if self.weight_tensor_idx != -1 and self.weight_stream_bytes:
            share = np.array([1 + self._stream_share(c.shape) for _, c, _ in group])
            read[:, :, self.weight_tensor_idx] *= share[:, None]
        if self.op in _BLOCK_FETCHED:
            total_blocks = np.stack([n @ v for n, v in zip(n_blocks, stripes, strict=True)])
            read[:, :, 0] = self._block_fetches([c for _, c, _ in group], blocks, total_blocks)
        dtype_bytes = self.output.dtype_bytes
        for index, (key, config, _) in enumerate(group):
            self._block_terms[key] = (dpu[index], out[index], n_blocks[index], out_part[index],
                                      dpu_part[index], stripes[index], written[index])  # fmt: skip
            self._block_costs[key] = BlockCosts(
                cycles[index],
                read[index],
                written[index] * dtype_bytes,
                partial(self._stripe_blocks, config.shape),
            )

    def _reads_of(self, shape: tuple[int, ...]) -> np.ndarray:
        """Bytes read per input by every "vela" block config for a stripe of `shape`."""
        found = self._vela_reads.get(shape)
        if found is None:
            self._count_vela_reads([shape])
            found = self._vela_reads[shape]
        return found

    def _block_fetches(
        self, configs: list[StripeConfig], blocks: np.ndarray, total_blocks: np.ndarray
    ) -> np.ndarray:
        """IFM bytes per config (rows) and block config as Vela counts them for stripes of
        the config (`total_blocks` OFM blocks in all): each OFM block fetches, per
        sub-kernel, the IFM block clipped to the stripe's IFM (not to what the block needs
        at an edge) across the IFM depth (bricks rounded to 16 channels); a depthwise or
        pooling op fetches once per spatial block, its depth blocks sharing the fetch."""
        stripe = np.array([self._ifm_stripe(config) for config in configs], dtype=np.int64)
        blocks_hw = self._ifm_blocks
        area = np.minimum(blocks_hw[:, 0], stripe[:, 0, None]) * np.minimum(
            blocks_hw[:, 1], stripe[:, 1, None]
        )
        fetches = total_blocks
        if self.op not in _WHOLE_IFM_DEPTH:
            axes = list(self._depth_axes)
            ofm_depth = np.array([config.shape for config in configs], dtype=np.float64)[:, axes]
            fetches = fetches / np.prod(np.ceil(ofm_depth[:, None, :] / blocks[:, axes]), axis=2)
        return fetches * area * stripe[:, 2, None] * self.subkernels * self.inputs[0].dtype_bytes

    def _stream_share(self, shape: tuple[int, ...]) -> float:
        """Bytes a stripe of `shape` reads of its weight stream's overhead per encoded byte
        of its weights (Vela counts weight bytes as the stripe's slice encodes them)."""
        weights = self.inputs[self.weight_tensor_idx]
        channels = math.prod(shape[axis] for axis in self._depth_axes)
        per_channel = math.prod(weights.shape[1:]) * weights.dtype_bytes
        ratio = weights.compression_ratio * self.weight_compression
        return self.weight_stream_bytes / (ratio * per_channel * min(channels, weights.shape[0]))

    def _stripe_blocks(self, shape: tuple[int, ...]) -> tuple:
        """The (input, output) block shapes of every "vela" block config for stripes of
        `shape`, each output block clipped to the stripe rounded up to whole micro-blocks:
        the schedule runs a stripe with a block valid for its own shape, which is what
        Vela's burst efficiency sees."""
        found = self._clipped_blocks.get(shape)
        if found is None:
            clipped = self._clipped_outputs(shape).tolist()
            if self._full_blocks:
                found = tuple(zip(self._block_ifms, map(tuple, clipped), strict=True))
            else:
                found = tuple(
                    (ifm, tuple(out[: len(ofm)]))
                    for (ifm, ofm), out in zip(self._block_shapes, clipped, strict=True)
                )
            self._clipped_blocks[shape] = found
        return found

    def _clipped_outputs(self, shape: tuple[int, ...]) -> np.ndarray:
        """`_stripe_blocks`' output blocks as a (block config, axis) array, zero-padded
        like the "vela" block list (zero padding never clips)."""
        quantum = self.output_quantum
        dims = self._vela_out.shape[1]
        limit = np.array(
            [-(-shape[a] // quantum[a]) * quantum[a] if a < min(len(shape), len(quantum))
             else shape[a] if a < len(shape) else 2**62 for a in range(dims)],
            dtype=np.int64,
        )  # fmt: skip
        return np.minimum(self._vela_out, limit)

    def access_costs(
        self, costs: BlockCosts, shape: tuple[int, ...], slot: int, region: MemoryRegion
    ) -> AccessCosts:
        """Vela's burst efficiency over the region's bandwidth, per block config (output
        blocks clipped to stripes of `shape`); constants move at full bandwidth, as encoded.
        The block choice (`ethosu.vela_cost.fastest_block`) weighs weights by element and
        reads no scale-bias; the evaluator then charges both."""
        is_read = slot < len(self.inputs)
        tensor = self.inputs[slot] if is_read else self.output
        bandwidth = region.read_bandwidth if is_read else region.write_bandwidth
        if tensor.is_constant:
            ratio = tensor.compression_ratio * self.weight_encoding(slot)[0]
            counted = np.full(len(costs.compute_cycles), ratio / bandwidth)
            if not is_read:
                return AccessCosts(counted, counted)
            picked = 1.0 / region.read_bandwidth if slot == self.weight_tensor_idx else 0.0
            return AccessCosts(counted, np.full(counted.shape, picked))
        if is_read:
            key = (slot, region.name, bandwidth, region.burst_length)
            counted = self._input_access.get(key)
            if counted is None:
                counted = self._input_access[key] = (
                    self._input_efficiencies(tensor, costs, region) / bandwidth
                )
        elif self._full_blocks:
            efficiency = burst_efficiencies(tensor, self._clipped_outputs(shape), region, False)
            counted = efficiency / bandwidth
        else:
            counted = _efficiencies(tensor, [b for _, b in costs.block_shapes], region, False)
            counted = counted / bandwidth
        return AccessCosts(counted, counted)

    def _input_efficiencies(
        self, tensor: Tensor, costs: BlockCosts, region: MemoryRegion
    ) -> np.ndarray:
        """Burst efficiency of reading `tensor` per block config: from the input blocks,
        which do not depend on the stripe, as one array when they have as many axes."""
        if self._ifm_array is not None:
            return burst_efficiencies(tensor, self._ifm_array, region, True)
        return _efficiencies(tensor, [b for b, _ in costs.block_shapes], region, True)

    def weight_encoding(self, slot: int) -> tuple[float, int]:
        if slot == self.weight_tensor_idx:
            return self.weight_compression, self.weight_stream_bytes
        return 1.0, 0

    @property
    def double_buffers_whole_weights(self) -> bool:
        """A convolution's weights (not a fully connected op's): as the schedule's
        `double_buffered` slices them."""
        return self.weight_tensor_idx >= 0 and self.op != "fully_connected"

    def to_json(self) -> dict:
        data = super().to_json()
        data.update(
            {
                "op": self.op,
                "output_quantum": list(self.output_quantum),
                "subkernels": self.subkernels,
                "weight_tensor_idx": self.weight_tensor_idx,
                "block_configs": [b.to_json() for b in self.block_configs],
            }
        )
        if not self.rows_outermost:  # a pad: written only where it differs from Ethos-U's
            data["rows_outermost"] = False
        return data
