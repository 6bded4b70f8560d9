"""Weights and per-channel scaling of a convolution, read from memory as the NPU reads them.

Output channels are dealt to the cores in turn (core k computes channels k, k + cores, ...),
each core with its own weight stream (WEIGHT_BASE/LENGTH, WEIGHT1_* for core 1) and scale
stream (SCALE_*, SCALE1_*). A weight stream is mlw-encoded in the traversal order of
`weight_order` for that core's share of OFM_BLK_DEPTH; a scale stream holds one 10-byte
record per channel: a 40-bit signed bias, a 32-bit multiplier and a 6-bit shift (the layout
of Vela's `encode_bias`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cascader.simulator.descriptors import StreamRange
from cascader.simulator.errors import FindingKind
from cascader.simulator.memory import Memory, Reporter, region_name
from cascader.simulator.mlw_decode import decode_stream
from cascader.simulator.weight_order import WeightLayout, stream_order

SCALE_RECORD_BYTES = 10


@dataclass(frozen=True)
class ChannelScaling:
    """Per OFM channel: bias, multiplier, shift (int64 arrays)."""

    biases: np.ndarray
    multipliers: np.ndarray
    shifts: np.ndarray


def core_channels(ofm_depth: int, cores: int, core: int) -> np.ndarray:
    return np.arange(core, ofm_depth, cores)


def core_block_depth(block_depth: int, cores: int, core: int) -> int:
    """A core's share of the OFM block depth (the block is split across the cores)."""
    return (block_depth + cores - 1 - core) // cores


def _read_stream(
    memory: Memory, stream: StreamRange, length: int, what: str, reporter: Reporter
) -> bytes:
    addresses = stream.address + np.arange(length, dtype=np.int64)
    values, _ = memory.gather(stream.region, addresses, what, reporter)
    return values.tobytes()


def read_weights(
    memory: Memory,
    streams: tuple[StreamRange, ...],
    shape: tuple[int, int, int, int],  # OHWI, I = 1 for depthwise
    block_depth: int,
    depthwise: bool,
    part_kernel_first: bool,
    ifm_bits: int,
    dilation: tuple[int, int],
    ublocks: tuple[int, int],  # (IFM, OFM) micro-block depths
    reporter: Reporter,
) -> np.ndarray | None:
    """OHWI weights (int64) of all cores, or None (reported) if a stream does not decode."""
    ofm_depth, height, width, ifm_depth = shape
    weights = np.zeros(shape, np.int64)
    cores = len(streams)
    for core, stream in enumerate(streams):
        channels = core_channels(ofm_depth, cores, core)
        if channels.size == 0:
            continue
        what = "weight stream" + (f" {core}" if cores > 1 else "")
        layout = WeightLayout(
            ofm_depth=int(channels.size),
            kernel_height=height,
            kernel_width=width,
            ifm_depth=ifm_depth,
            ofm_block_depth=max(core_block_depth(block_depth, cores, core), 1),
            depthwise=depthwise,
            part_kernel_first=part_kernel_first,
            ifm_bits=ifm_bits,
            dilation_y=dilation[0],
            dilation_x=dilation[1],
            ifm_ublock=ublocks[0],
            ofm_ublock=ublocks[1],
        )
        order = stream_order(layout)
        where = f"{stream.length} bytes at {stream.address:#x} of {region_name(stream.region)}"
        decoded = decode_stream(_read_stream(memory, stream, stream.length, what, reporter))
        if decoded is None:
            reporter.report(
                FindingKind.BAD_WEIGHTS,
                f"{what} ({where}) does not decode: it ends before its end-of-stream marker",
            )
            return None
        if decoded.size < order.size:
            reporter.report(
                FindingKind.BAD_WEIGHTS,
                f"{what} ({where}) decodes to {decoded.size} weights; the operation needs "
                f"{order.size}",
            )
            return None
        # The decoder takes the weights the operation needs; bytes past them are unused.
        used = order >= 0
        core_weights = np.zeros((channels.size, height, width, ifm_depth), np.int64)
        core_weights.reshape(-1)[order[used]] = decoded[: order.size][used]
        weights[channels] = core_weights
    return weights


def read_scaling(
    memory: Memory, streams: tuple[StreamRange, ...], ofm_depth: int, reporter: Reporter
) -> ChannelScaling | None:
    """Bias, multiplier and shift per OFM channel, or None (reported) if a stream is short."""
    biases = np.zeros(ofm_depth, np.int64)
    multipliers = np.zeros(ofm_depth, np.int64)
    shifts = np.zeros(ofm_depth, np.int64)
    cores = len(streams)
    for core, stream in enumerate(streams):
        channels = core_channels(ofm_depth, cores, core)
        if channels.size == 0:
            continue
        what = "scale stream" + (f" {core}" if cores > 1 else "")
        needed = SCALE_RECORD_BYTES * int(channels.size)
        if stream.length < needed:
            reporter.report(
                FindingKind.BAD_WEIGHTS,
                f"{what} is {stream.length} bytes; {channels.size} channels need {needed}",
            )
            return None
        raw = np.frombuffer(_read_stream(memory, stream, needed, what, reporter), np.uint8)
        records = raw.reshape(-1, SCALE_RECORD_BYTES).astype(np.int64)
        bias = sum(records[:, j] << (8 * j) for j in range(5))
        biases[channels] = np.where(bias >= 1 << 39, bias - (1 << 40), bias)
        multipliers[channels] = sum(records[:, 5 + j] << (8 * j) for j in range(4))
        shifts[channels] = records[:, 9] & 0x3F
    return ChannelScaling(biases, multipliers, shifts)
