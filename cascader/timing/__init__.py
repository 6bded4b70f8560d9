"""Timed cycles: what a register command stream takes when each command costs what Vela's
per-operation formulas say and DMA overlaps compute only where the stream's waits allow.

Vela's estimate sums per-operation costs with its own assumption about which DMAs hide under
compute; this package runs the stream the compiler emitted instead, so an estimate can be
checked against the waits and queue depths the hardware will obey.

Public API:
- `time_model(tflite_bytes, system_config=None, memory_mode=None, config_path=...,
  layers=None)` -> `TimedStream` (`cycles`, every kernel operation's and DMA's `TimedJob`,
  engine `busy`). `layers`: `LayerCycles.of(compile_model(...))`, Vela's C++ core's own
  per-layer cycles for the file it wrote, in place of the legacy formulas (`regor_layers`).
- `time_payload(command_stream, system)`: one `ethos-u` operator's driver payload.
- `kernel_cost` / `dma_cycles`: one command's cycles from its registers.
- `TimingError`: a command whose cost the registers do not determine.
"""

from cascader.timing.model import ethos_u_payloads, time_model
from cascader.timing.op_cost import KernelCost, SystemAreas, dma_cycles, kernel_cost
from cascader.timing.regor_layers import LayerCycles, LayersRefused
from cascader.timing.timeline import TimedJob, TimedStream, TimingError, time_payload

__all__ = [
    "KernelCost",
    "LayerCycles",
    "LayersRefused",
    "SystemAreas",
    "TimedJob",
    "TimedStream",
    "TimingError",
    "dma_cycles",
    "ethos_u_payloads",
    "kernel_cost",
    "time_model",
    "time_payload",
]
