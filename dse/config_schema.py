"""The JSON Schema of an exported design-point config, the ranges of the cascader's numeric
options (the command line takes the same), and a validator for the part of JSON Schema it
uses (type, const, enum, minimum, maximum, minLength, pattern, required, properties,
additionalProperties, items), so loading needs no extra package."""

from __future__ import annotations

import math
import re
from typing import Any

from cascader.core import options
from cascader.ethosu.vela_compiler import ALLOCATORS, FEATURES, OPTIMISE

CONFIG_FORMAT = "cascader-dse-config"
CONFIG_VERSION = 1

# What each numeric cascader option may be. Beyond these bounds the cascader does the same
# as at them or only takes longer: stripe factors past 33 already split every axis (at most
# 2**24 long) down to its last quantum, and enumerating 10**6 of them took 17 s; a plan
# holds at most every operator of a model (at most 65536), proposals are thinned to a count
# of at most all of them; no tensor a model may hold is over 4 GiB.
# The options a sweep explores and a config carries, with the ranges the cascader takes.
OPTION_RANGES: dict[str, tuple[int, int]] = {
    name: options.OPTION_RANGES[name]
    for name in ("stripe_factors", "max_plan_size", "max_proposals", "always_copy_size")
}
MAX_POOL_BYTES = 1 << 40  # an Ethos-U65's address space; the device refuses beyond its own
MAX_SEED = (1 << 32) - 1  # Optuna's samplers seed numpy, whose seeds are 32 bits
MAX_COUNT = (1 << 63) - 1

_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
_POOL = {"type": "integer", "minimum": 16, "maximum": MAX_POOL_BYTES}
_NAME = {"type": "string", "minLength": 1}
_OPTIONS = {
    "type": "object",
    "required": [
        "enable_striping",
        "enable_multi_dimensional_striping",
        "stripe_factors",
        "max_plan_size",
        "max_proposals",
        "always_copy_size",
    ],
    "additionalProperties": False,
    "properties": {
        "enable_striping": {"type": "boolean"},
        "enable_multi_dimensional_striping": {"type": "boolean"},
        **{
            name: {"type": "integer", "minimum": low, "maximum": high}
            for name, (low, high) in OPTION_RANGES.items()
        },
        "cost_model": {"enum": list(options.COST_MODELS)},
    },
}

CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "cascader-dse design-point config",
    "type": "object",
    "required": [
        "format",
        "version",
        "model",
        "accelerator",
        "system_config",
        "memory_mode",
        "sram_pool_bytes",
        "cascader",
        "predicted",
        "snippets",
    ],
    "additionalProperties": False,
    "properties": {
        "format": {"const": CONFIG_FORMAT},
        "version": {"const": CONFIG_VERSION},
        "model": {
            "type": "object",
            "required": ["kind", "path", "sha256"],
            "additionalProperties": False,
            "properties": {
                "kind": {"enum": ["model", "graph"]},
                "path": _NAME,
                "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            },
        },
        "accelerator": _NAME,
        "system_config": _NAME,
        "memory_mode": _NAME,
        "vela_config": {"type": ["string", "null"]},
        "sram_pool_bytes": _POOL,
        "cascader": {
            "type": "object",
            "required": ["enabled", "options", "proposal_region_bytes"],
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "options": _OPTIONS,
                "proposal_region_bytes": _POOL,
                # With the cascader off (absent: True, as before it was a choice).
                "buffer_weights": {"type": "boolean"},
                # Narrow feature maps stored NHWC (absent: False, in 16-channel bricks).
                "narrow_nhwc": {"type": "boolean"},
                # A mean's sum rows first (absent: False, one sum of the whole window).
                "row_sum_mean": {"type": "boolean"},
            },
        },
        # Who made the point's schedule (absent: the cascader, as before Vela was a producer);
        # a `vela` point is rebuilt by Vela's compiler with the options under "vela".
        "producer": {"enum": ["cascader", "vela"]},
        "vela": {
            "type": "object",
            "required": ["optimise", "disabled", "tensor_allocator", "command_line"],
            "additionalProperties": False,
            "properties": {
                "optimise": {"enum": list(OPTIMISE)},
                "disabled": {"type": "array", "items": {"enum": list(FEATURES)}},
                "tensor_allocator": {"enum": list(ALLOCATORS)},
                "command_line": {"type": "array", "items": {"type": "string"}},
            },
        },
        "predicted": {
            "type": "object",
            "required": ["total_cycles", "sram_used_bytes", "inference_time_s", "scored_by"],
            "additionalProperties": False,
            "properties": {
                "total_cycles": _COUNT,
                "sram_used_bytes": _COUNT,
                "inference_time_s": {"type": ["number", "null"], "minimum": 0, "maximum": 1e9},
                "scored_by": _NAME,
            },
        },
        "study": {
            "type": "object",
            "required": ["name", "trial"],
            "properties": {"name": _NAME, "trial": _COUNT, "storage": {"type": "string"}},
        },
        "snippets": {
            "type": "object",
            "required": ["tvm", "vela_ini", "vela_flags"],
            "additionalProperties": False,
            "properties": {
                "tvm": {"type": "object"},
                "vela_ini": {"type": "string"},
                "vela_flags": {"type": "array", "items": {"type": "string"}},
                "vela_note": {"type": "string"},
            },
        },
    },
}

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is_type(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False  # JSON booleans are not numbers
    if isinstance(value, float) and not math.isfinite(value):
        return False  # JSON has no NaN or infinity; Python's reader takes them all the same
    return isinstance(value, _TYPES[name])


def schema_errors(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every place `value` breaks `schema`, as 'path: problem' lines (empty when valid)."""
    if "const" in schema and value != schema["const"]:
        return [f"{path}: must be {schema['const']!r}, got {_shown(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: must be one of {schema['enum']}, got {_shown(value)}"]
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, n) for n in names):
            return [f"{path}: must be {' or '.join(names)}, got {type(value).__name__}"]
    errors: list[str] = []
    if "minimum" in schema and _is_type(value, "number") and value < schema["minimum"]:
        errors.append(f"{path}: must be at least {schema['minimum']}, got {_shown(value)}")
    if "maximum" in schema and _is_type(value, "number") and value > schema["maximum"]:
        errors.append(f"{path}: must be at most {schema['maximum']}, got {_shown(value)}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: must not be empty")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {_shown(value)} does not match {schema['pattern']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{path}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        for key, item in value.items():
            if key in props:
                errors += schema_errors(item, props[key], f"{path}.{key}")
            elif schema.get("additionalProperties", True) is False:
                errors.append(f"{path}: unknown key {_shown(key)}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    return errors


def _shown(value: Any) -> str:
    """A value as an error message quotes it: short, on one line."""
    try:
        text = " ".join(repr(value).split())
    except ValueError:  # an integer too long to print
        return f"a {type(value).__name__} too long to show"
    return text if len(text) <= 40 else text[:37] + "..."
