"""Writing an operation's OFM through its addressing, recording the bytes for hazards."""

from __future__ import annotations

import numpy as np

from cascader.simulator.addressing import write_feature_map
from cascader.simulator.context import Access, OpContext
from cascader.simulator.descriptors import FeatureMap


def write_ofm(ctx: OpContext, ofm: FeatureMap, values: np.ndarray) -> None:
    addresses = write_feature_map(ctx.memory, ofm, values, ctx.reporter)
    ctx.accesses.append(Access.of_elements(ofm.region, True, addresses, ofm.element_bytes, "OFM"))
