"""A convolution's constants as the NPU reads them: Vela's weight encoding
(`npu_encode_weights`) and scale-bias records (`npu_encode_bias`) of any output-channel range,
and how a multi-core Ethos-U (ethos-u65-512) shares the channels between its cores (each core
reads its own weight and scale-bias streams, laid out one after the other), so the scheduler
sizes the buffers constants are copied into exactly as codegen lays them out."""

from __future__ import annotations

import hashlib
import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from ethosu.vela.api import NpuBlockTraversal, npu_encode_bias, npu_encode_weights

from cascader.ethosu.vela_arch import default_arch, npu_accelerator
from cascader.ir.npu_ops import Conv2D, NpuOp
from cascader.ir.units import SCALE_BIAS_BYTES, align
from cascader.memo import Memo, caches_on, module_memo

__all__ = [
    "core_bias_streams",
    "core_shares",
    "core_weight_streams",
    "encoded_size",
    "encoded_weights",
    "is_part_kernel_first",
    "laid_out",
    "scale_bias_bytes",
]


def is_part_kernel_first(op: Conv2D) -> bool:
    """Vela's traversal choice for a conv2d (better DPU utilisation, always for depth <= 8)."""
    if op.kind == "depthwise_conv2d":
        return False
    _, kh, kw, depth = op.weights.shape
    kernel = kh * kw
    depth_use = depth / math.ceil(depth / 32) / 32
    part_kernel_use = (depth / (math.ceil(depth / 8) * 8)) * (kernel / (math.ceil(kernel / 4) * 4))
    return part_kernel_use >= depth_use or depth <= 8


# Encodings by content (equal weights of another op or of a rebuilt network), bounded: a
# sweep's schedules slice the same channels again and again.
_ENCODED: Memo[tuple, bytes] = module_memo("ethosu.weights encodings by content", 8192)


@dataclass
class _OpConstants:
    """One convolution's encoded constants, kept while the op lives: a sweep schedules the
    same network's ops again and again, slicing the same channels each time."""

    bias_records: np.ndarray | None = None  # (channels, SCALE_BIAS_BYTES) uint8, Vela's records
    weights: Memo[tuple, bytes] = field(default_factory=lambda: Memo("Conv2D encoded slices"))


_BY_OP: weakref.WeakKeyDictionary[Conv2D, _OpConstants] = weakref.WeakKeyDictionary()


def _op_constants(op: Conv2D) -> _OpConstants:
    """The op's constants' memos (with the caches off, new ones each time: nothing kept)."""
    if not caches_on():
        return _OpConstants()
    found = _BY_OP.get(op)
    if found is None:
        found = _BY_OP[op] = _OpConstants()
    return found


def laid_out(streams: list[bytes]) -> bytes:
    """Per-core streams end to end, each but the last padded so the next starts aligned."""
    return b"".join(s + bytes(align(len(s)) - len(s)) for s in streams[:-1]) + streams[-1]


def core_weight_streams(accelerator: str, op: Conv2D, lo: int, hi: int, depth: int) -> list[bytes]:
    """Vela's encoding of the weights of output channels [lo, hi) for OFM blocks `depth` deep,
    one stream per active core."""
    return [
        _encoded_weights(accelerator, op, channels, core_depth)
        for channels, core_depth in core_shares(accelerator, lo, hi, depth)
    ]


def encoded_weights(accelerator: str, op: Conv2D, lo: int, hi: int, depth: int) -> bytes:
    """The weights of output channels [lo, hi) as the NPU reads them: each core's stream in
    core order, 16-byte aligned (a single core's is just Vela's encoding)."""
    return laid_out(core_weight_streams(accelerator, op, lo, hi, depth))


def encoded_size(accelerator: str, ops: Sequence[NpuOp]) -> Callable[[int, int, int, int], int]:
    """(part, lo, hi, block depth) -> bytes of part `part`'s encoded weights for output
    channels [lo, hi): what the schedule sizes weight buffers with. It is the length of
    `encoded_weights`, counted from the cores' streams without joining them (the schedule
    asks for sizes thousands of times a point)."""

    def size(part: int, lo: int, hi: int, depth: int) -> int:
        streams = core_weight_streams(accelerator, ops[part], lo, hi, depth)
        return sum(align(len(s)) for s in streams[:-1]) + len(streams[-1])

    return size


def _encoded_weights(accelerator: str, op: Conv2D, channels: slice, depth: int) -> bytes:
    """Cached per op and slice, and under that by content (equal weights of another op or
    of a rebuilt network): the scheduler sizes buffers with it, codegen emits it, and a
    sweep encodes the same slices again and again."""
    memo = _op_constants(op).weights
    key = (accelerator, channels.start, channels.stop, channels.step, depth)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _encoded_by_content(accelerator, op, channels, depth)
    return found


def _encoded_by_content(accelerator: str, op: Conv2D, channels: slice, depth: int) -> bytes:
    weights = op.weights[channels].astype(np.int16) - np.int16(op.weight_zero_point)
    key = (
        accelerator,
        hashlib.sha256(weights.tobytes()).hexdigest(),
        weights.shape,
        op.kind,
        op.kernel.dilation_w,
        op.kernel.dilation_h,
        op.ifm.dtype,
        depth,
    )
    found = _ENCODED.lookup(key)
    if found is None:
        found = _encode(accelerator, op, weights, depth)
        _ENCODED.keep(key, found)
    return found


def _encode(accelerator: str, op: Conv2D, weights: np.ndarray, depth: int) -> bytes:
    traversal = (
        NpuBlockTraversal.PART_KERNEL_FIRST
        if is_part_kernel_first(op)
        else NpuBlockTraversal.DEPTH_FIRST
    )
    encoded = npu_encode_weights(
        npu_accelerator(accelerator),
        weights,
        (op.kernel.dilation_w, op.kernel.dilation_h),
        8 if op.ifm.dtype in ("int8", "uint8") else 16,
        depth,
        op.kind == "depthwise_conv2d",
        traversal,
    )
    return bytes(encoded)


def core_bias_streams(accelerator: str, op: Conv2D, lo: int, hi: int, depth: int) -> list[bytes]:
    """Vela's scale-bias encoding of output channels [lo, hi), one stream per active core."""
    records = _bias_records(op)
    return [records[channels].tobytes() for channels, _ in core_shares(accelerator, lo, hi, depth)]


def _bias_records(op: Conv2D) -> np.ndarray:
    """Vela's scale-bias record of each output channel (`npu_encode_bias`), one row each,
    encoded once per op: a stream is its channels' records end to end."""
    memo = _op_constants(op)
    if memo.bias_records is None:
        packed = b"".join(
            bytes(npu_encode_bias(np.int64(b), int(m), int(s)))
            for b, m, s in zip(op.biases, op.multipliers, op.shifts, strict=True)
        )
        records = np.frombuffer(packed, dtype=np.uint8).reshape(-1, SCALE_BIAS_BYTES)
        records.flags.writeable = False
        memo.bias_records = records
    return memo.bias_records


def core_shares(accelerator: str, lo: int, hi: int, depth: int) -> list[tuple[slice, int]]:
    """Each active core's output channels of [lo, hi) and its OFM block depth. Vela deals the
    channels round-robin, so each core computes its share of every `depth`-deep OFM block."""
    ncores = default_arch(accelerator).ncores
    shares = []
    for core in range(min(ncores, hi - lo)):
        core_depth = (depth + ncores - 1 - core) // ncores
        if core_depth:
            shares.append((slice(lo + core, hi, ncores), core_depth))
    return shares


def scale_bias_bytes(accelerator: str, lo: int, hi: int, depth: int) -> int:
    """Bytes of the scale-bias of output channels [lo, hi): the cores' streams end to end,
    each but the last padded to 16 bytes so the next core's starts aligned."""
    sizes = [
        SCALE_BIAS_BYTES * len(range(*channels.indices(hi)))
        for channels, _ in core_shares(accelerator, lo, hi, depth)
    ]
    return sum(align(n) for n in sizes[:-1]) + sizes[-1]
