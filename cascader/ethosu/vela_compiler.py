"""Vela 5.2's C++ compiler core (`ethosu.regor`), called in this process: one compile per design
point, handing back the `_vela.tflite` bytes and Vela's own performance report.

`vela_baseline` runs Vela's whole command-line entry (argument parsing, a summary CSV written to a
temporary directory and read back); this gives the same core the same inputs that entry gives it,
so the bytes are the ones `vela` writes (`VelaOptions.command_line` is that command), with the
numbers read from the report itself. The process's stdout and stderr are redirected while regor
runs, so compile one model at a time per process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ethosu import regor
from ethosu.vela.architecture_features import ArchitectureFeatures
from ethosu.vela.tensor import MemArea, Tensor

from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_arch import DEFAULT_VELA_INI, VelaConfigError, check_vela_system
from cascader.ethosu.vela_baseline import OPTIMISE, VelaError, captured_output

__all__ = [
    "ALLOCATORS",
    "FEATURES",
    "OPTIMISE",
    "VelaCommand",
    "VelaCompiled",
    "VelaError",
    "VelaLayer",
    "VelaOptions",
    "compile_model",
]

# The scheduler features regor can be told to leave out (its `disable_feature` names) that
# Vela's command line can also switch off, each with that command line's flag.
FEATURES: tuple[str, ...] = ("Cascading", "WeightBuffering", "Grouping", "FWD", "ReuseIFM")
_FEATURE_FLAGS = {
    "Cascading": "--disable-cascading",
    "WeightBuffering": "--disable-buffering",
    "Grouping": "--disable-chaining",
    "FWD": "--disable-fwd",
    "ReuseIFM": "--disable-ifm-reuse",
}
# The order Vela's command line writes them into regor's options (kept, so the text is Vela's).
_VELA_FEATURE_ORDER = ("Grouping", "FWD", "Cascading", "WeightBuffering", "ReuseIFM")
# Tensor allocators regor implements, Vela's default first. Vela's --tensor-allocator also
# offers Greedy, which regor does not know: it prints so and runs HillClimb instead.
ALLOCATORS: tuple[str, ...] = ("HillClimb", "LinearAlloc")

# What Vela's command line passes regor when its flags are left at their defaults.
_CPU_TENSOR_ALIGNMENT = Tensor.AllocationQuantum  # --cpu-tensor-alignment
_SOFTMAX_INT16_NEG_EXP_RANGE = 10.0  # --experimental-softmax-int16-neg-exp-range
_COP_FORMAT = "COP1"  # --cop-format

# regor's memory names -> this project's area names (perf.AREAS); its SHRAM and LUT RAM are
# buffers inside the NPU, which Vela's summary leaves out too.
_AREAS = {"sram": "sram", "dram": "dram", "onchipflash": "onchip_flash",
          "offchipflash": "offchip_flash"}  # fmt: skip
# The first bytes' second word says what a model file is (Vela's own test): regor's format name.
_FORMATS = {b"TFL3": "TFLITE", b"TOSA": "TOSA"}


@dataclass(frozen=True)
class VelaOptions:
    """One Vela compile's settings: what a `vela`-produced design point chooses plus the device."""

    accelerator: str  # any of vela_arch.VELA_ACCELERATORS, e.g. "ethos-u85-256"
    system_config: str
    memory_mode: str
    config_path: str | None = None  # a vela.ini; None = Vela's own Arm/vela.ini
    optimise: str = "Performance"
    arena_size_limit: int | None = None  # bytes (--arena-cache-size); None = the ini's / Vela's
    disabled: tuple[str, ...] = ()  # regor features left out, a subset of FEATURES
    tensor_allocator: str = ALLOCATORS[0]

    def __post_init__(self) -> None:
        """Refuse names regor would ignore or misread (DeviceConfigError, a ValueError listing
        the valid ones), and keep `disabled` in FEATURES order so equal settings are equal
        options (and hash alike)."""
        if self.optimise not in OPTIMISE:
            raise DeviceConfigError("optimise strategy", self.optimise, OPTIMISE)
        if self.tensor_allocator not in ALLOCATORS:
            raise DeviceConfigError("tensor allocator", self.tensor_allocator, ALLOCATORS)
        disabled = (self.disabled,) if isinstance(self.disabled, str) else tuple(self.disabled)
        for name in disabled:
            if name not in FEATURES:
                raise DeviceConfigError("feature", name, FEATURES)
        object.__setattr__(self, "disabled", tuple(f for f in FEATURES if f in disabled))
        if self.config_path is not None:
            path = os.fspath(self.config_path)
            if not path.endswith(".ini"):  # Vela's command line refuses any other name
                raise VelaConfigError("vela config file", path, "must be a .ini file")
            object.__setattr__(self, "config_path", path)
        limit = self.arena_size_limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValueError(f"arena size limit must be a whole number of bytes, not {limit!r}")

    @property
    def ini(self) -> Path:
        """The vela.ini this compile reads."""
        return Path(self.config_path) if self.config_path is not None else DEFAULT_VELA_INI

    def command_line(self, model: str | Path, output_dir: str | Path) -> list[str]:
        """The `vela` argv (starting with "vela") that rebuilds exactly this compile into
        `output_dir`, for a user to rerun a design point with Vela itself."""
        config = "Arm/vela.ini" if self.config_path is None else os.path.abspath(self.config_path)
        argv = [
            "vela",
            os.fspath(model),
            "--accelerator-config", self.accelerator,
            "--config", config,  # Vela reads a two-part relative path as one of its own
            "--system-config", self.system_config,
            "--memory-mode", self.memory_mode,
            "--optimise", self.optimise,
        ]  # fmt: skip
        if self.arena_size_limit is not None:
            argv += ["--arena-cache-size", str(self.arena_size_limit)]
        argv += ["--tensor-allocator", self.tensor_allocator]
        argv += [_FEATURE_FLAGS[f] for f in self.disabled]
        return [*argv, "--output-dir", os.fspath(output_dir)]


class VelaLayer(NamedTuple):
    """One NPU operation of Vela's per-layer report (what `vela --verbose-performance`
    prints): the TFLite operator it comes from (its index in subgraph 0; a decomposed softmax
    gives several), regor's name for the operation, its cycles and MACs. `cycles` is regor's
    whole operation: the longest of `npu_cycles` and each memory's access cycles, where
    `npu_cycles` is the compute plus the weight (and LUT) transfer regor does not hide under
    the operation before."""

    tflite_index: int
    operator: str
    cycles: int
    npu_cycles: int
    macs: int


class VelaCommand(NamedTuple):
    """A command of the _vela.tflite that regor's queue table ties to a layer: the command
    stream (its place among the file's `ethos-u` operators' streams, in order), the command's
    byte offset in it, and the layer it starts (an index into `VelaCompiled.layers`). regor
    records the first command each of its operations emits; the commands after it, up to the
    next one recorded, are that operation's too (a transpose emits one per slice)."""

    stream: int
    offset: int
    layer: int


@dataclass(frozen=True)
class VelaCompiled:
    """What one regor compile gives: the _vela.tflite bytes and Vela's own performance report
    (per inference, batch 1; cycles at the system config's core clock)."""

    tflite: bytes = field(repr=False)
    total_cycles: int  # the inference, memory-bound parts included (Vela's cycles_total)
    npu_cycles: int  # the NPU's own compute cycles (Vela's cycles_npu)
    sram_used_bytes: int  # Vela's "Total SRAM used" (its summary's sram_memory_used)
    peak_bytes: dict[str, int]  # regor's peak usage of each memory, by perf.AREAS name
    access_bytes: dict[str, float]  # bytes read + written per memory, by perf.AREAS name
    macs: int
    npu_ops: int  # operators running on the NPU
    cpu_ops: int  # operators left to the CPU (TFLite Micro)
    layers: tuple[VelaLayer, ...] = ()  # in Vela's order; their cycles sum to total_cycles
    commands: tuple[VelaCommand, ...] = ()  # regor's queue table, in stream and offset order


def compile_model(model: str | Path | bytes, options: VelaOptions) -> VelaCompiled:
    """Compile `model` (a .tflite path or its bytes) with Vela's C++ core in this process, as
    the `vela` command line `options.command_line(...)` would. Bad names raise a one-line
    DeviceConfigError/VelaConfigError listing the valid ones; a model regor refuses raises
    VelaError. The model must be a valid flatbuffer: regor crashes the process on a corrupt
    one, as it does `vela`, so check untrusted files first (frontend.tflite_check)."""
    arch = check_vela_system(
        options.accelerator,
        options.system_config,
        options.memory_mode,
        options.ini,
        options.arena_size_limit,
    )
    data, name = _model_bytes(model)
    fmt = _FORMATS.get(data[4:8])
    if fmt is None:
        raise VelaError(f"{name} is not a TFLite (or TOSA) model; give a .tflite file")
    system = _system_text(arch, options.ini)
    settings = _options_text(options, arch.arena_cache_size)
    failure: Exception | None = None
    with captured_output():
        try:
            accelerator = _regor_accelerator(options.accelerator)
            compiled = regor.compile(accelerator, data, fmt, system, options=settings)
        except Exception as exc:  # regor raises ValueError or RuntimeError with its reason
            failure = exc
    if failure is not None:
        reason = " ".join(str(failure).split())[:300] or type(failure).__name__
        raise VelaError(f"vela (regor) failed on {name}: {reason}")
    if not isinstance(compiled, regor.CompiledTFLiteModel):
        raise VelaError(f"vela (regor) gave no TFLite model for {name}")
    return _compiled(compiled, arch)


def _model_bytes(model: str | Path | bytes) -> tuple[bytes, str]:
    """The model's bytes and a name for messages."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "the model"
    path = Path(model)
    if not path.is_file():
        raise FileNotFoundError(f"model {path} not found")
    return path.read_bytes(), path.name


def _regor_accelerator(accelerator: str) -> str:
    """regor names the family only ("ethos-u85-256" -> "EthosU85"); the MACs and cores go in
    the system text."""
    family = accelerator.split("-")[1]
    return "Ethos" + family.upper()


def _system_text(arch: ArchitectureFeatures, ini: Path) -> str:
    """regor's system description as Vela's command line builds it: the NPU size, the chosen
    sections' names, then the vela.ini itself."""
    head = (
        f"[architecture]\nmacs={arch.num_macs_per_cycle}\ncores={arch.ncores}\n"
        f"[vela]\nsystem_config_name={arch.system_config}\nmemory_mode_name={arch.memory_mode}\n"
    )
    return head + ini.read_bytes().decode("utf-8")


def _options_text(options: VelaOptions, arena_cache_size: int) -> str:
    """regor's compiler options as Vela's command line writes them for these settings with
    `--verbose-performance` (the arena limit is Vela's resolved one: the option, else the
    memory mode's, else the whole address space)."""
    disabled = "|".join(f for f in _VELA_FEATURE_ORDER if f in options.disabled)
    sections = {
        # enable_db: regor's per-layer tables, as `vela --verbose-performance` asks for them;
        # the output's bytes do not depend on it (tests/ethosu/test_vela_compiler.py).
        "compiler": {"enable_db": "true", "output_format": "TFLite", "cop_format": _COP_FORMAT},
        "scheduler": {
            "optimize": options.optimise,
            "arena_size_limit": arena_cache_size,
            "disable_feature": disabled,
            "cpu_tensor_alignment": _CPU_TENSOR_ALIGNMENT,
            "tensor_allocator": options.tensor_allocator,
        },
        "graph": {"softmax_int16_neg_exp_range": _SOFTMAX_INT16_NEG_EXP_RANGE},
    }
    lines: list[str] = []
    for section, values in sections.items():
        lines += ["", f"[{section}]", *(f"{key}={value}" for key, value in values.items())]
    return "\n".join(lines) + "\n"


def _compiled(compiled: regor.CompiledTFLiteModel, arch: ArchitectureFeatures) -> VelaCompiled:
    """Read regor's performance report the way Vela's summary does."""
    report = compiled.perf_report
    peak: dict[str, int] = {}
    access: dict[str, float] = {}
    for memory_name, memory in report.memories.items():
        area = _AREAS.get(str(memory_name).lower())
        if area is None:
            continue
        peak[area] = int(memory.peakUsage)
        access[area] = float(sum(a.bytesRead + a.bytesWritten for a in memory.accesses.values()))
    sram_used = peak.get("sram", 0)
    if (
        report.readOnlyPeakUsage > 0
        and arch.permanent_storage_mem_area == MemArea.OnChipFlash
        and "onchip_flash" not in peak
    ):
        # Constants kept in the SRAM itself (Sram_Only: Vela's on-chip-flash alias) count in
        # regor's SRAM peak; Vela's summary reports them apart, as on-chip flash.
        sram_used -= int(report.readOnlyPeakUsage)
    layers, commands = _report(compiled.opt_database)
    return VelaCompiled(
        tflite=bytes(compiled.model),
        total_cycles=int(report.totalCycles),
        npu_cycles=int(report.npuCycles),
        sram_used_bytes=sram_used,
        peak_bytes=peak,
        access_bytes=access,
        macs=int(report.macCount),
        npu_ops=int(report.npuOps),
        cpu_ops=int(report.cpuOps),
        layers=layers,
        commands=commands,
    )


def _report(database: regor.Database) -> tuple[tuple[VelaLayer, ...], tuple[VelaCommand, ...]]:
    """Vela's per-layer report from regor's tables (`layers`), and the commands its queue
    table ties to them (`commands`). Each "perf" row is an NPU operation of a "source"
    operator, whose `ext_key` is its TFLite operator index; rows of neither cycles, MACs nor
    commands of their own (activations fused into the operation before) are left out. A
    queued operation whose source regor does not name leaves `commands` empty: which layer
    those commands are would be a guess."""
    if "perf" not in database.tables or "source" not in database.tables:
        return (), ()
    source = database.tables["source"]
    index_of = {row[source.header.index("id")]: int(row[source.header.index("ext_key")])
                for row in source.data}  # fmt: skip
    queued = _queue(database)
    with_commands = {operation for _, _, operation in queued}
    perf = database.tables["perf"]
    names = ("id", "source_id", "operator", "op_cycles", "npu_cycles", "mac_count")
    column = {name: perf.header.index(name) for name in names}
    layers: list[VelaLayer] = []
    layer_of: dict[str, int] = {}
    for row in perf.data:
        cycles, macs = int(row[column["op_cycles"]]), int(row[column["mac_count"]])
        own = cycles or macs or row[column["id"]] in with_commands
        if own and row[column["source_id"]] in index_of:
            layer_of[row[column["id"]]] = len(layers)
            layers.append(VelaLayer(index_of[row[column["source_id"]]], row[column["operator"]],
                                    cycles, int(row[column["npu_cycles"]]), macs))  # fmt: skip
    if not with_commands <= layer_of.keys():
        return tuple(layers), ()
    commands = sorted(VelaCommand(stream, offset, layer_of[operation])
                      for stream, offset, operation in queued)  # fmt: skip
    return tuple(layers), tuple(commands)


def _queue(database: regor.Database) -> list[tuple[int, int, str]]:
    """regor's queue table: (command stream, byte offset, scheduled operation id) of each
    command it recorded, the streams numbered 0.. in the order of regor's ids (the order of
    the file's `ethos-u` operators)."""
    if "queue" not in database.tables:
        return []
    queue = database.tables["queue"]
    column = {name: queue.header.index(name) for name in ("offset", "cmdstream_id", "scheduled_id")}
    streams = sorted({int(row[column["cmdstream_id"]]) for row in queue.data})
    return [(streams.index(int(row[column["cmdstream_id"]])), int(row[column["offset"]]),
             row[column["scheduled_id"]]) for row in queue.data]  # fmt: skip
