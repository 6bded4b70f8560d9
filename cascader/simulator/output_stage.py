"""The end of every NPU operation: OFM zero point, clipping, the activation LUT, saturation.

Scaled values get the OFM zero point, then are clipped to the activation range: ACTIVATION_MIN
and ACTIVATION_MAX within the OFM type's range (or within the range ACTIVATION forces, which
Vela sets for a LUT feeding a 32-bit OFM). A 32-bit OFM without a LUT is raw accumulator-style
data: no zero point, the whole int32 range (the 16-bit MIN/MAX registers cannot bound it).
Vela's softmax relies on both: its int32 intermediates carry the IFM's zero point and a
[-129, 126] clip in their registers, which must not apply (`reference.scaling` models it the
same way). With
a LUT, the clipped value indexes the table in SHRAM slot ACTIVATION - 16 (256 bytes per slot
from 2 KiB below the top of SHRAM): 256 bytes for an 8-bit OFM, 256 int32 words for a 32-bit
OFM. Index 0 holds the entry of the range's lowest value (-128 for int8).
"""

from __future__ import annotations

import numpy as np

from cascader.simulator.accelerator import AcceleratorConfig
from cascader.simulator.context import Access, OpContext
from cascader.simulator.descriptors import ActivationSetting, FeatureMap, Unsupported
from cascader.simulator.memory import SHRAM

LUT_SLOT_BYTES = 256
_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
    "int32": (-(1 << 31), (1 << 31) - 1),
}


def lut_addresses(
    config: AcceleratorConfig, slot: int, entries: np.ndarray, entry_bytes: int
) -> np.ndarray:
    """SHRAM byte addresses of the given entries of the table in a slot: (entries, bytes)."""
    base = config.lut_base + LUT_SLOT_BYTES * slot
    return base + entries[:, None] * entry_bytes + np.arange(entry_bytes, dtype=np.int64)


def finish(
    values: np.ndarray, ofm: FeatureMap, act: ActivationSetting, ctx: OpContext
) -> np.ndarray:
    """Scaled int64 values -> the OFM's stored values (int64 holding the OFM type); the
    LUT entries looked up are recorded as SHRAM reads."""
    low, high = _RANGES[ofm.dtype]
    if act.lut_slot is None and ofm.dtype == "int32":
        return np.clip(values, low, high)
    v = values + ofm.zero_point
    if act.lut_slot is None:
        if act.clip is not None:
            low, high = max(low, act.clip[0]), min(high, act.clip[1])
        return np.clip(v, max(low, act.minimum), min(high, act.maximum))
    if ofm.dtype in ("int16", "uint16"):
        raise Unsupported("a LUT activation with a 16-bit OFM (interpolating table)")
    range_low, range_high = act.clip if act.clip is not None else (low, high)
    if range_high - range_low != 255:
        raise Unsupported(f"a LUT indexed over [{range_low}, {range_high}]")
    index = np.clip(v, max(range_low, act.minimum), min(range_high, act.maximum)) - range_low
    entry_bytes = 4 if ofm.dtype == "int32" else 1
    used = np.unique(index)  # only the entries looked up are read
    addresses = lut_addresses(ctx.config, act.lut_slot, used, entry_bytes)
    raw, _ = ctx.memory.gather(SHRAM, addresses, "LUT", ctx.reporter)
    ctx.accesses.append(Access.of_elements(SHRAM, False, addresses[:, 0], entry_bytes, "LUT"))
    table_type = {"int8": "<i1", "uint8": "<u1", "int32": "<i4"}[ofm.dtype]
    table = np.zeros(256, np.int64)
    table[used] = np.ascontiguousarray(raw).view(table_type)[:, 0]
    return table[index]
