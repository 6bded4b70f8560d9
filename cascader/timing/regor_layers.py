"""Each kernel command's cycles from Vela's C++ core's own per-layer report, for timing the
`_vela.tflite` that core wrote.

Why: regor costs its operations with its own formulas, not the legacy Python ones `op_cost`
uses, and on a single operation the two differ by up to 8x. Timing regor's output with
regor's per-layer cycles checks what the stream itself adds (waits, queue depths, the DMA
overlap) against regor's estimate, instead of comparing two per-operation models.

Which commands a layer is, is regor's own record: its queue table gives, per operation, the
byte offset of the first command it emitted (`VelaCompiled.commands`). Every kernel command
from there up to the next recorded one is that operation's (a transpose emits a command per
slice and records the first). A layer's cycles are spread over its kernel commands in
proportion to the legacy formula's cost of each, so a layer run as several stripes or slices
keeps their relative sizes. A layer's cycles are regor's whole operation (`VelaLayer.cycles`,
the longest of its compute and memory access): its `npu_cycles` would leave a memory-bound
operation's access time out. Either also holds the weight transfer regor does not hide;
the DMA jobs add their own, so that transfer is counted twice where the stream waits for it.

The mapping is refused, never guessed (`LayersRefused`, the legacy formulas stay): when
regor recorded no commands, or a different number of command streams than the file has;
when a recorded offset is not a kernel command; when a stream's first kernel command comes
before any recorded one; and when a layer of nonzero cycles has no kernel command.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from cascader.ethosu.vela_compiler import VelaCommand, VelaCompiled
from cascader.timing.timeline import CostedStream

__all__ = ["LayerCycles", "LayersRefused", "layer_kernel_cycles"]


class LayersRefused(ValueError):
    """regor's layers do not map onto the file's kernel commands; the message says where."""


@dataclass(frozen=True)
class LayerCycles:
    """regor's cycles of each layer and the commands its queue table ties to them."""

    cycles: tuple[int, ...]
    commands: tuple[VelaCommand, ...]

    @classmethod
    def of(cls, compiled: VelaCompiled) -> LayerCycles:
        """The layers of one regor compile (`compile_model`), whose `tflite` is the file."""
        return cls(tuple(layer.cycles for layer in compiled.layers), compiled.commands)


def layer_kernel_cycles(
    layers: LayerCycles, streams: Sequence[CostedStream]
) -> list[dict[int, float]]:
    """Per command stream of the file (its `ethos-u` operators' streams, in order): each
    kernel command's cycles by byte offset, its layer's cycles spread over the layer's
    kernel commands in proportion to their legacy costs. Raises LayersRefused."""
    recorded = {(c.stream, c.offset): c.layer for c in layers.commands}
    count = len({c.stream for c in layers.commands})
    if count != len(streams):
        raise LayersRefused(
            f"regor recorded commands in {count} command streams, the file has {len(streams)}"
        )
    owner: dict[tuple[int, int], int] = {}  # (stream, offset) of a kernel command -> layer
    for index, stream in enumerate(streams):
        layer = None
        for command in stream.operations:
            key = (index, command.offset)
            if key in recorded:
                if command.offset not in stream.kernels:
                    raise LayersRefused(
                        f"stream {index}: regor's command at {command.offset:#06x} is "
                        f"{command.name}, not a kernel operation"
                    )
                layer = recorded[key]
            if command.offset in stream.kernels:
                if layer is None:
                    raise LayersRefused(
                        f"stream {index}: {command.name} at {command.offset:#06x} comes before "
                        "any command regor recorded"
                    )
                owner[key] = layer
    legacy: dict[int, float] = {}
    for (index, offset), layer in owner.items():
        legacy[layer] = legacy.get(layer, 0.0) + streams[index].kernels[offset].cycles
    for layer, cycles in enumerate(layers.cycles):
        if cycles and layer not in legacy:
            raise LayersRefused(f"layer {layer} has {cycles} cycles and no kernel command")
    shares = Counter(owner.values())
    out: list[dict[int, float]] = [{} for _ in streams]
    for (index, offset), layer in owner.items():
        cost, total = streams[index].kernels[offset].cycles, legacy[layer]
        share = cost / total if total > 0 else 1 / shares[layer]
        out[index][offset] = layers.cycles[layer] * share
    return out
