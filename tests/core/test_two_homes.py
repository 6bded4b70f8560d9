"""Feature maps that may live in two regions (Ethos-U65's Dedicated_Sram: the SRAM cascade
region or the DRAM arena) still give proposals covering the whole graph."""

from dataclasses import replace

import pytest

from cascader.core.cascade import cascade
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.tensor_config import TensorConfigState
from cascader.ethosu.synthetic import GraphBuilder


def _dedicated_sram(document, sram_size: int):
    """The document's graph with U65-like homes: constants, graph inputs and outputs in DRAM,
    every other feature map in SRAM or DRAM."""
    graph = document.graph
    boundary = {t.id for t in graph.input_tensors} | {t.id for t in graph.output_tensors}
    regions = {
        "SRAM": MemoryRegion("SRAM", sram_size, 32, 32, 32, 32, 32),
        "DRAM": MemoryRegion("DRAM", 1 << 30, 8, 8, 500, 250, 128),
    }
    homes = {
        t.id: ["DRAM"] if t.is_constant or t.id in boundary else ["SRAM", "DRAM"]
        for t in graph.tensors
    }
    return graph, regions, homes


def _autoencoder(layers: int):
    """A chain of fully connected layers (1x1 convolutions on a 1x1 map), as ad_autoencoder."""
    builder = GraphBuilder()
    x = builder.input(1, 1, 128)
    for index in range(layers):
        x = builder.conv(x, 8 if index == layers // 2 else 128)
    return builder.build([x])


@pytest.mark.parametrize("always_copy_size", [1024, 1 << 20])
@pytest.mark.parametrize("striping", [True, False])
def test_two_homes_give_proposals(always_copy_size, striping):
    graph, regions, homes = _dedicated_sram(_autoencoder(10), 64 << 10)
    options = CascaderOptions(
        cascade_region="SRAM", always_copy_size=always_copy_size, enable_striping=striping
    )
    result = cascade(graph, regions, homes, options)
    assert result.proposals
    for proposal in result.proposals:
        assert proposal.part_ids == list(range(len(graph.parts)))
        # every tensor one plan writes as a BOUNDARY into the SRAM and another reads from the
        # SRAM is homed there by both (readers from the DRAM are not recorded)
        written = {
            plan.output_config.tensor.id: plan.output_config.home_region
            for plan in proposal.plans
            if plan.output_config.state == TensorConfigState.BOUNDARY
        }
        for plan in proposal.plans:
            for part_id in plan.part_ids:
                part = graph.parts[part_id]
                for config in plan.tensor_configs or ():
                    tid = config.tensor.id
                    if (
                        config.state == TensorConfigState.BOUNDARY
                        and tid in written
                        and tid in {t.id for t in part.inputs}
                        and config.home_region == "SRAM"
                        and not config.copy_tensor
                    ):
                        assert written[tid] == "SRAM"


def test_one_home_unchanged_by_second_region():
    """Adding an unused DRAM region changes nothing when every tensor has one home."""
    document = _autoencoder(6)
    graph = document.graph
    options = replace(document.options, cascade_region="SRAM")
    alone = cascade(graph, document.regions, document.home_map, options)
    regions = {**document.regions, "DRAM": MemoryRegion("DRAM", 1 << 30, 8, 8, 500, 250, 128)}
    both = cascade(graph, regions, document.home_map, options)
    assert [(p.memory_usage, p.cycles) for p in alone.proposals] == [
        (p.memory_usage, p.cycles) for p in both.proposals
    ]
