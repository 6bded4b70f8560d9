"""The least SRAM any schedule of a network can use where the SRAM holds its feature maps:
what a user compares a front's floor with to see how much is left to gain.

The bound holds for every schedule the NPU can run, striped, cascaded, tiled in 2-D or not:
a buffer is one allocation, so a tensor the network takes in is whole from the start until
its last reader runs, and one it gives out is whole from its producer's first stripe to the
end (an output laid over the input it consumes shares that input's bytes: the two hold at
least the larger). While an op runs, those whole tensors live beside its smallest working
set: one output quantum (`Part.stripe_align_hint`) and the input box each propagator maps
it to, which is the whole input for an op reading all of it (a fully connected layer, a
global pool). A copy (a concatenation's or a pad's block copy) moves each element once, so
its smallest working set is one quantum each way, whatever box its propagator reads today.
Constants are not counted: Ethos-U reads weights in place."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cascader.core.graph import CascaderGraph
from cascader.core.overlay import overlaid_input
from cascader.core.part import Part
from cascader.core.tensor import Tensor
from cascader.ir.npu_ops import Identity
from cascader.schedule.network import Network

__all__ = ["SramLowerBound", "derivation", "sram_lower_bound"]


@dataclass(frozen=True)
class SramLowerBound:
    """`bytes`: the bound. It is reached while part `part` runs (None for a graph with no
    part), with `whole` (tensor ids) held whole and `working` bytes of its smallest stripe
    beside them."""

    bytes: int
    part: int | None = None
    whole: tuple[int, ...] = ()
    working: int = 0


def sram_lower_bound(network: Network, io_in_memory: bool = True) -> SramLowerBound:
    """The bound for `network` where the SRAM holds its feature maps; with `io_in_memory`
    False (the arena lives elsewhere, where every op can read and write it), nothing needs
    to be in SRAM: 0."""
    graph = network.graph
    if not io_in_memory or not graph.parts:
        return SramLowerBound(0)
    runs = [p for p in graph.parts if not p.in_line]
    before = _reaches(graph, upstream=True)  # part -> parts it (transitively) reads from
    after = _reaches(graph, upstream=False)  # part -> parts reading it (transitively)
    held: list[tuple[Tensor, int]] = []  # (tensor, mask of the parts it is whole during)
    for tensor in graph.input_tensors:
        if tensor.is_constant:
            continue
        readers = _readers(tensor)
        mask = 0
        for reader in readers:
            mask |= before[reader.id] | (1 << reader.id)
        held.append((tensor, mask))
    for tensor in graph.output_tensors:
        producer = _producer(tensor)
        if producer is not None:
            held.append((tensor, after[producer.id] | (1 << producer.id)))
    best = SramLowerBound(0)
    for part in runs:
        whole = {t.id: t for t, mask in held if mask >> part.id & 1}
        copy = isinstance(network.ops[part.id], Identity)
        working = _working_set(part, set(whole), copy)
        total = sum(t.size for t in whole.values()) + working - _shared(part, whole)
        if total > best.bytes:
            best = SramLowerBound(total, part.id, tuple(sorted(whole)), working)
    return best


def _shared(part: Part, whole: dict[int, Tensor]) -> int:
    """Bytes two whole tensors may share while `part` runs: its output laid over the input
    it consumes (`core.overlay`) takes at least the larger of the two, not both."""
    slot = overlaid_input(part)
    out, source = _root(part.output).id, _root(part.inputs[slot]).id if slot >= 0 else -1
    if out in whole and source in whole:
        return min(whole[out].size, whole[source].size)
    return 0


def _working_set(part: Part, whole: set[int], copy: bool) -> int:
    """Bytes of `part`'s smallest stripe: one output quantum and the input boxes it reads
    (one quantum for a `copy`), less what is already held whole. An output written over its
    input needs no room of its own."""
    out = part.output
    quantum = np.minimum(np.asarray(part.stripe_align_hint), np.asarray(out.shape))
    windows: dict[int, int] = {}
    for tensor, propagator in zip(part.inputs, part.propagators, strict=True):
        root = _root(tensor)
        if tensor.is_constant or root.id in whole:
            continue
        if copy:
            elements = int(np.prod(quantum))
        else:
            box = propagator.propagate_shapes(quantum[None, :])[0]
            if len(box) == len(tensor.shape):
                box = np.minimum(box, tensor.shape)
            elements = int(np.prod(np.maximum(box, 1)))
        windows[root.id] = max(windows.get(root.id, 0), tensor.scaled_bytes(elements))
    own = (
        0
        if (part.in_place_slots or _root(out).id in whole)
        else out.scaled_bytes(int(np.prod(quantum)))
    )
    return sum(windows.values()) + own


def _root(tensor: Tensor) -> Tensor:
    """The tensor whose bytes `tensor` is: through in-line parts (reshapes) to their input."""
    while tensor.producers and tensor.producers[0].in_line:
        tensor = tensor.producers[0].inputs[0]
    return tensor


def _producer(tensor: Tensor) -> Part | None:
    """The part that writes `tensor`'s bytes (past in-line parts)."""
    root = _root(tensor)
    return root.producers[0] if root.producers else None


def _readers(tensor: Tensor) -> list[Part]:
    """The parts that read `tensor`'s bytes: its consumers, through in-line parts."""
    found: list[Part] = []
    for consumer in tensor.consumers:
        if consumer.in_line:
            found += _readers(consumer.output)
        else:
            found.append(consumer)
    return found


def _reaches(graph: CascaderGraph, upstream: bool) -> list[int]:
    """Per part, the bitmask of the parts it depends on (`upstream`) or that depend on it.
    Parts are in reverse topological order, so one pass in the right direction suffices."""
    masks = [0] * len(graph.parts)
    order = reversed(graph.parts) if upstream else graph.parts
    for part in order:
        if upstream:
            for tensor in part.inputs:
                for producer in tensor.producers:
                    masks[part.id] |= masks[producer.id] | (1 << producer.id)
        else:
            for consumer in part.output.consumers:
                masks[part.id] |= masks[consumer.id] | (1 << consumer.id)
    return masks


def derivation(bound: SramLowerBound, network: Network, op_label: str) -> str:
    """How `bound` was reached, in a sentence: the op running (`op_label`, the caller's name
    for it), its smallest stripe, and the tensors held whole beside it."""
    if bound.part is None:
        return "the arena is not in SRAM: every op can read and write its feature maps elsewhere"
    whole = ", ".join(
        f"{network.feature_map(t).name} ({network.graph.tensors[t].size:,} B)" for t in bound.whole
    )
    held = f", beside {whole} held whole" if whole else ""
    return f"while {op_label} runs: its smallest stripe needs {bound.working:,} B{held}"
