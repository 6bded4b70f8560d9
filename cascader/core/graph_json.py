"""Graph JSON: read, validate and write a CascaderGraph with its regions, homes and options.

Every validation error is a GraphFormatError whose message starts with the path of the bad
field, e.g. `parts[3].propagators[0].offset: expected 4 entries, got 3`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cascader.core.errors import GraphFormatError
from cascader.core.graph import CascaderGraph
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions
from cascader.core.part import InlinePart, Part
from cascader.core.propagator import Propagator
from cascader.core.tensor import DTYPE_BYTES, Tensor

FORMAT = "cascader-graph"
VERSION = 1
# Top-level fields kept verbatim: provenance and captured results (golden graphs carry them).
EXTRA_FIELDS = ("source", "accelerator", "pool_bytes", "expected", "tvm_generate_proposals_seconds")
_CORE_FIELDS = ("format", "version", "tensors", "parts", "inputs", "outputs")
_SETUP_FIELDS = ("regions", "home_map", "options")


@dataclass
class GraphDocument:
    """A graph plus, when the document defines a full run, its regions, homes and options;
    `extras` holds the other top-level fields (e.g. golden `expected` results)."""

    graph: CascaderGraph
    regions: dict[str, MemoryRegion] | None = None
    home_map: dict[int, list[str]] | None = None
    options: CascaderOptions | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def fail(path: str, message: str) -> GraphFormatError:
    return GraphFormatError(f"{path}: {message}")


def require(obj: dict, key: str, path: str) -> Any:
    if key not in obj:
        raise fail(f"{path}.{key}" if path else key, "missing")
    return obj[key]


# Every number of a graph is bounded, so that no product or quotient of them the cascader forms
# overflows a float or an int64: sizes and shapes well past any NPU's, factors past any layer's.
MAX_INT = 1 << 40
MAX_DIM = 1 << 20
MAX_MAGNITUDE = float(1 << 20)
MIN_MAGNITUDE = 1e-6


def read_int(value: Any, path: str, minimum: int | None = None, maximum: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(path, f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise fail(path, f"must be >= {minimum}, got {value}")
    if abs(value) > maximum:
        raise fail(path, f"must be at most {maximum} in size, got {value}")
    return value


def read_number(value: Any, path: str, positive: bool = False) -> float:
    """A finite number of at most `MAX_MAGNITUDE`; `positive`: at least `MIN_MAGNITUDE`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail(path, f"expected a number, got {value!r}")
    if abs(value) > MAX_MAGNITUDE:
        raise fail(path, f"must be at most {MAX_MAGNITUDE:g} in size, got {value!r}")
    if positive and value < MIN_MAGNITUDE:
        raise fail(path, f"must be at least {MIN_MAGNITUDE:g}, got {value!r}")
    return value


def read_flag(value: Any, path: str) -> bool:
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise fail(path, f"expected true/false or 0/1, got {value!r}")


def read_list(value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise fail(path, f"expected a list, got {type(value).__name__}")
    return value


def read_dict(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise fail(path, f"expected an object, got {type(value).__name__}")
    return value


def read_ints(
    value: Any, path: str, minimum: int | None = None, maximum: int = MAX_INT
) -> tuple[int, ...]:
    return tuple(
        read_int(v, f"{path}[{i}]", minimum, maximum) for i, v in enumerate(read_list(value, path))
    )


@dataclass(frozen=True)
class PartFields:
    """What every part of a graph JSON has, read and checked by the core."""

    pid: int
    inputs: list[Tensor]
    output: Tensor
    propagators: list[Propagator]
    stripe_align_hint: tuple[int, ...] | None


class PartReader(Protocol):
    """Reads the rest of a part of one kind (its `raw` JSON at `path`) into a Part."""

    def __call__(self, raw: dict, path: str, fields: PartFields) -> Part: ...


NO_PART_KINDS: Mapping[str, PartReader] = {}


def _tensor_ref(value: Any, path: str, tensors: list[Tensor]) -> Tensor:
    index = read_int(value, path, 0)
    if index >= len(tensors):
        raise fail(path, f"no tensor with id {index} ({len(tensors)} tensors)")
    return tensors[index]


def _read_tensors(raw: Any) -> list[Tensor]:
    entries = read_list(raw, "tensors")
    by_id: dict[int, Tensor] = {}
    for i, entry in enumerate(entries):
        path = f"tensors[{i}]"
        entry = read_dict(entry, path)
        tid = read_int(require(entry, "id", path), f"{path}.id", 0)
        if tid in by_id:
            raise fail(f"{path}.id", f"duplicate tensor id {tid}")
        dtype = entry.get("dtype", "int8")
        if dtype not in DTYPE_BYTES:
            raise fail(f"{path}.dtype", f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
        ratio = read_number(
            entry.get("compression_ratio", 1.0), f"{path}.compression_ratio", positive=True
        )
        tensor = Tensor(
            tid,
            read_ints(require(entry, "shape", path), f"{path}.shape", 0, MAX_DIM),
            dtype,
            read_flag(entry.get("is_constant", False), f"{path}.is_constant"),
            ratio,
        )
        if tensor.size > MAX_INT:
            raise fail(f"{path}.shape", f"gives {tensor.size} bytes, more than {MAX_INT}")
        if "size" in entry and read_int(entry["size"], f"{path}.size", 0) != tensor.size:
            raise fail(f"{path}.size", f"is {entry['size']} but shape and dtype give {tensor.size}")
        by_id[tid] = tensor
    if sorted(by_id) != list(range(len(by_id))):
        raise fail("tensors", "ids must be 0..n-1 (positions in the tensor order)")
    return [by_id[i] for i in range(len(by_id))]


def _read_propagator(raw: Any, path: str, output_dims: int, input_dims: int) -> Propagator:
    raw = read_dict(raw, path)
    rows = read_list(require(raw, "transform", path), f"{path}.transform")
    matrix = [
        [
            read_number(v, f"{path}.transform[{r}][{c}]")
            for c, v in enumerate(read_list(row, f"{path}.transform[{r}]"))
        ]
        for r, row in enumerate(rows)
    ]
    if len(matrix) != input_dims + 1:
        raise fail(f"{path}.transform", f"expected {input_dims + 1} rows, got {len(matrix)}")
    for r, row in enumerate(matrix):
        if len(row) != output_dims + 1:
            raise fail(
                f"{path}.transform[{r}]", f"expected {output_dims + 1} columns, got {len(row)}"
            )
    offset = read_ints(require(raw, "offset", path), f"{path}.offset", maximum=MAX_DIM)
    if len(offset) != input_dims:
        raise fail(f"{path}.offset", f"expected {input_dims} entries, got {len(offset)}")
    return Propagator(matrix, list(offset))


def _read_part(
    raw: Any, path: str, tensors: list[Tensor], part_kinds: Mapping[str, PartReader]
) -> Part:
    raw = read_dict(raw, path)
    pid = read_int(require(raw, "id", path), f"{path}.id", 0)
    kind = require(raw, "kind", path)
    inputs = [
        _tensor_ref(v, f"{path}.inputs[{i}]", tensors)
        for i, v in enumerate(read_list(require(raw, "inputs", path), f"{path}.inputs"))
    ]
    output = _tensor_ref(require(raw, "output", path), f"{path}.output", tensors)
    raw_props = read_list(require(raw, "propagators", path), f"{path}.propagators")
    if len(raw_props) != len(inputs) or not inputs:
        raise fail(
            f"{path}.propagators",
            f"expected one propagator per input ({len(inputs)}), got {len(raw_props)}",
        )
    propagators = [
        _read_propagator(p, f"{path}.propagators[{i}]", len(output.shape), len(t.shape))
        for i, (p, t) in enumerate(zip(raw_props, inputs, strict=True))
    ]
    hint = raw.get("stripe_align_hint")
    if hint is not None:
        hint = read_ints(hint, f"{path}.stripe_align_hint", 1)
        if len(hint) < len(output.shape):
            raise fail(
                f"{path}.stripe_align_hint",
                f"needs at least {len(output.shape)} entries (output rank), got {len(hint)}",
            )
    if kind == "inline":
        return InlinePart(pid, inputs, output, propagators, hint)
    reader = part_kinds.get(kind)
    if reader is None:
        kinds = ", ".join(repr(k) for k in ("inline", *part_kinds))
        raise fail(f"{path}.kind", f"expected one of {kinds}, got {kind!r}")
    return reader(raw, path, PartFields(pid, inputs, output, propagators, hint))


def _read_regions(raw: Any) -> dict[str, MemoryRegion]:
    regions = {}
    for name, entry in read_dict(raw, "regions").items():
        path = f"regions.{name}"
        entry = read_dict(entry, path)
        if entry.get("name", name) != name:
            raise fail(f"{path}.name", f"must match its key {name!r}, got {entry['name']!r}")
        regions[name] = MemoryRegion(
            name=name,
            size=read_int(require(entry, "size", path), f"{path}.size", 0),
            read_bandwidth=read_number(
                require(entry, "read_bandwidth", path), f"{path}.read_bandwidth", positive=True
            ),
            write_bandwidth=read_number(
                require(entry, "write_bandwidth", path), f"{path}.write_bandwidth", positive=True
            ),
            read_latency=read_int(entry.get("read_latency", 0), f"{path}.read_latency", 0),
            write_latency=read_int(entry.get("write_latency", 0), f"{path}.write_latency", 0),
            burst_length=read_int(entry.get("burst_length", 1), f"{path}.burst_length", 1),
        )
    return regions


def _read_home_map(raw: Any, n_tensors: int) -> dict[int, list[str]]:
    home_map = {}
    for key, names in read_dict(raw, "home_map").items():
        path = f"home_map.{key}"
        try:
            tid = int(key)
        except ValueError:
            raise fail(path, "keys must be tensor ids") from None
        if not 0 <= tid < n_tensors:
            raise fail(path, f"no tensor with id {tid}")
        names = read_list(names, path)
        if not names or not all(isinstance(n, str) for n in names):
            raise fail(path, "expected a non-empty list of region names")
        home_map[tid] = list(names)
    return home_map


def _read_options(raw: Any) -> CascaderOptions:
    raw = read_dict(raw, "options")
    types = CascaderOptions.field_types()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        path = f"options.{key}"
        kind = types.get(key)
        if kind is None:
            raise fail(path, f"unknown option; valid: {', '.join(types)}")
        if kind is bool:
            values[key] = read_flag(value, path)
        elif kind is int:
            values[key] = read_int(value, path)
        elif not isinstance(value, str):
            raise fail(path, f"expected a string, got {value!r}")
        else:
            values[key] = value
    try:
        return CascaderOptions(**values)
    except ValueError as error:  # a value out of its range, an unknown cost model
        raise fail("options", str(error)) from None


def graph_from_json(
    data: Any, part_kinds: Mapping[str, PartReader] = NO_PART_KINDS
) -> GraphDocument:
    """Parse and validate a graph JSON document (already decoded). Parts of kind "inline"
    are the core's own; every other kind is read by its reader in `part_kinds` (a device's:
    `cascader.ethosu.graph_json` reads "ethosu" parts)."""
    data = read_dict(data, "document")
    if data.get("format") != FORMAT:
        raise fail("format", f"expected {FORMAT!r}, got {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise fail("version", f"expected {VERSION}, got {data.get('version')!r}")
    for key in data:
        if key not in _CORE_FIELDS + _SETUP_FIELDS + EXTRA_FIELDS:
            raise fail(key, "unknown top-level field")
    tensors = _read_tensors(require(data, "tensors", ""))
    raw_parts = read_list(require(data, "parts", ""), "parts")
    parts = [_read_part(p, f"parts[{i}]", tensors, part_kinds) for i, p in enumerate(raw_parts)]
    parts.sort(key=lambda p: p.id)
    if [p.id for p in parts] != list(range(len(parts))):
        raise fail("parts", "ids must be 0..n-1 (positions in the part order)")
    inputs = [
        _tensor_ref(v, f"inputs[{i}]", tensors)
        for i, v in enumerate(read_list(require(data, "inputs", ""), "inputs"))
    ]
    outputs = [
        _tensor_ref(v, f"outputs[{i}]", tensors)
        for i, v in enumerate(read_list(require(data, "outputs", ""), "outputs"))
    ]
    try:
        graph = CascaderGraph(tensors, parts, inputs, outputs)
    except ValueError as error:
        raise fail("parts", str(error)) from None
    document = GraphDocument(graph)
    if "regions" in data:
        document.regions = _read_regions(data["regions"])
    if "home_map" in data:
        document.home_map = _read_home_map(data["home_map"], len(tensors))
        if document.regions is not None:
            for tid, names in document.home_map.items():
                for name in names:
                    if name not in document.regions:
                        raise fail(f"home_map.{tid}", f"unknown region {name!r}")
    if "options" in data:
        document.options = _read_options(data["options"])
        if document.regions is not None and document.options.cascade_region not in document.regions:
            raise fail(
                "options.cascade_region",
                f"{document.options.cascade_region!r} is not among the regions",
            )
    document.extras = {k: data[k] for k in EXTRA_FIELDS if k in data}
    return document


def graph_to_json(document: GraphDocument) -> dict:
    """The JSON object for a document; `graph_from_json(graph_to_json(d))` rebuilds `d`."""
    graph = document.graph
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "tensors": [
            {
                "id": t.id,
                "shape": list(t.shape),
                "dtype": t.dtype,
                "is_constant": t.is_constant,
                "compression_ratio": t.compression_ratio,
                "size": t.size,
            }
            for t in graph.tensors
        ],
        "parts": [p.to_json() for p in graph.parts],
        "inputs": [t.id for t in graph.input_tensors],
        "outputs": [t.id for t in graph.output_tensors],
    }
    if document.regions is not None:
        data["regions"] = {name: r.to_json() for name, r in document.regions.items()}
    if document.home_map is not None:
        data["home_map"] = {str(k): list(v) for k, v in document.home_map.items()}
    if document.options is not None:
        data["options"] = document.options.to_json()
    data.update(document.extras)
    return data


def load_graph(
    path: str | Path, part_kinds: Mapping[str, PartReader] = NO_PART_KINDS
) -> GraphDocument:
    """Read a graph JSON file (`graph_from_json`). Unreadable or non-JSON files raise
    GraphFormatError too."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise GraphFormatError(f"{path}: cannot read ({error.strerror or error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise GraphFormatError(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno})"
        ) from None
    return graph_from_json(data, part_kinds)


def save_graph(document: GraphDocument, path: str | Path) -> None:
    Path(path).write_text(json.dumps(graph_to_json(document)))
