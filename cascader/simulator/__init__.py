"""An Ethos-U55/U65 register command-stream simulator in numpy (no TVM).

It executes the 32-bit cmd0/cmd1 commands Vela (or this project's codegen) emits on memory
images of the regions the Ethos-U driver sets up, and reports what a real NPU would do
differently from what the compiler meant.

Public API:
- `RegionImage`: the bytes of one base-pointer region, its declared size and a per-byte
  "written" mask (`RegionImage.from_bytes(constants)`, `RegionImage.empty(arena_size)`).
- `simulate(command_stream, regions, accelerator=None, *, strict=False, copy=True)` ->
  `SimulationResult` (final `regions` and `shram`, `npu_ops`, `dma_ops`, `commands`,
  `findings`, `seconds`). `command_stream` is a raw register stream or Vela's driver payload
  (the `ethos-u` operator's first input); `regions` maps base-pointer index to image (0
  constants/flash, 1 arena/scratch, 2 fast scratch; one image under two indices aliases).
- `Finding` (`kind`, `offset`, `command`, `message`; `str()` is one line) and `FindingKind`:
  unsupported opcodes or register values, uninitialised reads, out-of-region accesses,
  unknown regions, malformed streams, undecodable weights, hazards (missing waits).
  `SimulationError` is raised for streams that cannot be simulated, or the first finding
  when `strict`.
- `TensorPlacement` (region, address, shape, dtype, layout NHWC/NHCWB16) with
  `read_tensor(image, placement)` -> (values, fully written?) and `write_tensor(...)`.
- `run_vela_tflite(model, inputs, accelerator=None)` -> `VelaRunResult` runs a Vela output
  .tflite (`tflite_runner` documents how regions, base pointers and I/O addresses are set up).
- `driver_refusals(model)` -> the `Finding`s (kind `driver-refusal`) for which Arm's driver or
  TFLite Micro's Ethos-U kernel would refuse to start a Vela-format file's command streams
  (alignment, payload framing, sizes): what a memory-image simulation cannot see.
"""

from cascader.simulator.driver import driver_refusals
from cascader.simulator.errors import Finding, FindingKind, SimulationError
from cascader.simulator.memory import SHRAM, RegionImage
from cascader.simulator.simulate import SimulationResult, simulate
from cascader.simulator.tensors import TensorPlacement, read_tensor, write_tensor
from cascader.simulator.tflite_runner import VelaModel, VelaRunResult, run_vela_tflite

__all__ = [
    "SHRAM",
    "Finding",
    "FindingKind",
    "RegionImage",
    "SimulationError",
    "SimulationResult",
    "TensorPlacement",
    "VelaModel",
    "VelaRunResult",
    "driver_refusals",
    "read_tensor",
    "run_vela_tflite",
    "simulate",
    "write_tensor",
]
