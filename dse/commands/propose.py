"""`dse propose`: run the cascader core on a graph JSON and print its proposals."""

from __future__ import annotations

import argparse
import dataclasses
import json

from cascader.core import CascaderOptions, GraphFormatError, cascade
from cascader.core.memory_region import MemoryRegion
from cascader.ethosu.graph_json import load_graph
from dse.errors import BadInput
from dse.inputs import check_graph
from dse.sizes import format_size

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _override_options(options: CascaderOptions, overrides: list[str]) -> CascaderOptions:
    """Apply `key=value` overrides; unknown keys and unparsable values are BadInput."""
    types = CascaderOptions.field_types()
    valid = ", ".join(types)
    values = {}
    for text in overrides:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep:
            raise BadInput(f"--option {text!r}: expected key=value; valid keys: {valid}")
        kind = types.get(key)
        if kind is None:
            raise BadInput(f"--option: unknown key {key!r}; valid keys: {valid}")
        raw = raw.strip()
        if kind is bool:
            if raw.lower() not in _TRUE | _FALSE:
                raise BadInput(f"--option {key}: {raw!r} is not a boolean (use true/false)")
            values[key] = raw.lower() in _TRUE
        elif kind is int:
            try:
                values[key] = int(raw)
            except ValueError:
                raise BadInput(f"--option {key}: {raw!r} is not an integer") from None
        else:
            values[key] = raw
    try:
        return dataclasses.replace(options, **values)
    except ValueError as error:  # a value the options refuse, e.g. an unknown cost model
        raise BadInput(f"--option: {error}") from None


def _default_regions(graph_regions: dict | None, sram: int | None) -> dict[str, MemoryRegion]:
    if graph_regions is not None:
        return dict(graph_regions)
    if sram is None:
        raise BadInput("the graph has no regions: give --sram SIZE for the cascade region")
    return {
        "SRAM": MemoryRegion("SRAM", sram, 16, 16),
        "FLASH": MemoryRegion("FLASH", 10_000_000, 4, 4),
    }


def run(args: argparse.Namespace) -> int:
    """Run the core on `args.graph` with its own regions/homes/options, `--sram` and
    `--option` overriding, and print the proposals (JSON with `--json`, else a table)."""
    check_graph(args.graph)
    try:
        document = load_graph(args.graph)
    except GraphFormatError as error:
        raise BadInput(f"bad graph {args.graph}: {error}") from None
    options = _override_options(
        document.options or CascaderOptions(), list(getattr(args, "option", None) or [])
    )
    sram = getattr(args, "sram", None)
    regions = _default_regions(document.regions, sram)
    if options.cascade_region not in regions:
        raise BadInput(
            f"cascade region {options.cascade_region!r} is not in the graph's regions "
            f"({', '.join(regions)})"
        )
    if sram is not None:
        region = regions[options.cascade_region]
        regions[options.cascade_region] = dataclasses.replace(region, size=int(sram))
    home_map = document.home_map
    if home_map is None:
        home_map = {
            t.id: ["FLASH" if t.is_constant and "FLASH" in regions else options.cascade_region]
            for t in document.graph.tensors
        }
    try:
        result = cascade(document.graph, regions, home_map, options)
    except ValueError as error:
        raise BadInput(f"cannot cascade {args.graph}: {error}") from None
    if getattr(args, "json", False):
        print(json.dumps(result.to_json()))
        return 0
    size = regions[options.cascade_region].size
    print(f"{len(result.proposals)} proposals for {args.graph} ({format_size(size)} region)")
    print(f"{'#':>3} {'memory':>12} {'cycles':>12} {'plans':>6}")
    for index, proposal in enumerate(result.proposals):
        mark = " <- chosen" if index == result.chosen_index else ""
        print(
            f"{index:>3} {proposal.memory_usage:>12} {proposal.cycles:>12} "
            f"{len(proposal.plans):>6}{mark}"
        )
    if result.chosen.memory_usage >= size:
        print("no proposal fits the region; the chosen one is the smallest")
    print(f"{result.seconds:.3f} s")
    return 0
