"""Graph JSON parts of kind "ethosu": an NPU operation's output quantum, sub-kernels, weight
input, valid block configs and, only where false (a pad), `rows_outermost`, read into an
EthosuPart. `load_graph` and `ethosu_graph_from_json` read a graph whose parts are the
Ethos-U's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cascader.core.graph_json import (
    MAX_DIM,
    GraphDocument,
    PartFields,
    PartReader,
    fail,
    graph_from_json,
    read_dict,
    read_flag,
    read_int,
    read_ints,
    read_list,
    require,
)
from cascader.core.graph_json import load_graph as load_any_graph
from cascader.ethosu.block_config import BlockConfig
from cascader.ethosu.part import EthosuPart


def _read_block_config(raw: Any, path: str) -> BlockConfig:
    raw = read_dict(raw, path)
    return BlockConfig(
        read_ints(require(raw, "input_shape", path), f"{path}.input_shape", 1, MAX_DIM),
        read_ints(require(raw, "output_shape", path), f"{path}.output_shape", 1, MAX_DIM),
        read_int(require(raw, "compute_cycles", path), f"{path}.compute_cycles", 0),
        read_int(require(raw, "output_cycles", path), f"{path}.output_cycles", 0),
    )


def read_ethosu_part(raw: dict, path: str, fields: PartFields) -> EthosuPart:
    """An "ethosu" part: the core's fields plus its block configs and NPU facts."""
    hint = fields.stripe_align_hint
    blocks = [
        _read_block_config(b, f"{path}.block_configs[{i}]")
        for i, b in enumerate(
            read_list(require(raw, "block_configs", path), f"{path}.block_configs")
        )
    ]
    if not blocks:
        raise fail(f"{path}.block_configs", "an ethosu part needs at least one block config")
    weight = read_int(raw.get("weight_tensor_idx", -1), f"{path}.weight_tensor_idx", -1)
    if weight >= len(fields.inputs):
        raise fail(f"{path}.weight_tensor_idx", f"{weight} is not an input index")
    quantum = read_ints(require(raw, "output_quantum", path), f"{path}.output_quantum", 1)
    if hint is None and len(quantum) < len(fields.output.shape):
        raise fail(f"{path}.output_quantum", f"needs at least {len(fields.output.shape)} entries")
    return EthosuPart(
        fields.pid,
        fields.inputs,
        fields.output,
        fields.propagators,
        quantum,
        read_int(raw.get("subkernels", 1), f"{path}.subkernels", 1),
        blocks,
        weight,
        hint,
        str(raw.get("op", "")),
        rows_outermost=read_flag(raw.get("rows_outermost", True), f"{path}.rows_outermost"),
    )


PART_KINDS: dict[str, PartReader] = {"ethosu": read_ethosu_part}


def load_graph(path: str | Path) -> GraphDocument:
    """A graph JSON file with Ethos-U parts."""
    return load_any_graph(path, PART_KINDS)


def ethosu_graph_from_json(data: Any) -> GraphDocument:
    """A decoded graph JSON document with Ethos-U parts."""
    return graph_from_json(data, PART_KINDS)
