"""Helpers of the simulator tests: LiteRT's built-in kernels, random inputs, diffs, and
edits of a command stream for fault injection."""

from __future__ import annotations

import numpy as np

from cascader.simulator import VelaModel
from cascader.simulator.commands import Command, decode_commands
from cascader.simulator.payload import parse_payload, replace_stream
from cascader.verify.litert import litert_outputs


def litert(model: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's built-in kernels (no XNNPACK delegate) on the original model."""
    return litert_outputs(model, inputs, "builtin")


def random_inputs(model: VelaModel, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.integers(-128, 128, model.tensors[i].shape).astype(model.tensors[i].dtype)
        for i in model.inputs
    ]


def max_abs_diff(a: list[np.ndarray], b: list[np.ndarray]) -> int:
    return max(
        int(np.abs(x.astype(np.int64) - y.astype(np.int64)).max())
        for x, y in zip(a, b, strict=True)
    )


def ethos_u_payload(model: VelaModel) -> tuple[int, bytes]:
    """(operator index, payload) of the model's first ethos-u operator."""
    op = next(o for o in model.operators if o.kind == "ethos-u")
    payload = model.tensors[op.inputs[0]].data
    assert payload is not None
    return op.index, payload


def commands_of(payload: bytes) -> tuple[list[int], list[Command]]:
    words = [int(w) for w in parse_payload(payload).streams[0]]
    commands, findings = decode_commands(np.array(words, np.uint32))
    assert not findings
    return words, commands


def edit_payload(payload: bytes, name: str, change: str, amount: int = 0, nth: int = 0) -> bytes:
    """The payload with the nth command called `name` changed: "add" adds `amount` to a cmd1
    payload, "drop" removes the command."""
    words, commands = commands_of(payload)
    command = [c for c in commands if c.name == name][nth]
    at = command.offset // 4
    if change == "add":
        words[at + 1] = (words[at + 1] + amount) & 0xFFFFFFFF
    elif change == "drop":
        del words[at : at + (2 if command.is_cmd1 else 1)]
    else:
        raise ValueError(change)
    return replace_stream(payload, words)
