"""The memory system of one Ethos-U configuration: MemoryRegions for the areas a vela.ini system
config x memory mode uses, which area holds constants, the I/O and arena tensors, and the
cascade (SRAM working) region, with the SRAM pool under exploration as the arena cache size."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ethosu.vela.architecture_features import ArchitectureFeatures
from ethosu.vela.tensor import BandwidthDirection, MemArea

from cascader.core.memory_region import MemoryRegion
from cascader.ethosu.perf_query import AREA_NAMES
from cascader.ethosu.vela_arch import (
    DEFAULT_VELA_INI,
    VelaIni,
    memory_modes,
    system_arch,
    system_configs,
    vela_ini,
)

__all__ = ["SystemMemory", "memory_modes", "system_configs", "system_memory"]

ROLES = ("constants", "io", "cascade")


@dataclass(frozen=True)
class SystemMemory:
    """Regions by area name ("sram", "dram", "offchip_flash", "onchip_flash"); bandwidths in
    bytes per NPU cycle. `roles` maps constants / io (Vela's arena: I/O and feature maps that
    do not fit the cascade) / cascade (the SRAM working region) to an area name; code that
    names a role reads its area through `constants_area`, `io_area` or `cascade_area`."""

    accelerator: str
    system_config: str
    memory_mode: str
    sram_bytes: int
    core_clock_hz: float
    regions: dict[str, MemoryRegion]
    roles: dict[str, str]
    vela_ini: VelaIni  # the file as read when this was made: memos key on its content

    @property
    def constants_area(self) -> str:
        """The area holding weights, scale-bias and lookup tables."""
        return self.roles["constants"]

    @property
    def io_area(self) -> str:
        """The area of Vela's arena: I/O and the feature maps the cascade region does not hold."""
        return self.roles["io"]

    @property
    def cascade_area(self) -> str:
        """The area of the cascade (SRAM working) region."""
        return self.roles["cascade"]

    def region(self, role: str) -> MemoryRegion:
        """The region of a role: constants, io or cascade."""
        if role not in self.roles:
            raise KeyError(f"unknown memory role {role!r}; roles: {', '.join(ROLES)}")
        return self.regions[self.roles[role]]

    @property
    def config_path(self) -> Path:
        """Where the vela.ini was read from."""
        return self.vela_ini.path

    @property
    def system(self) -> tuple[str, str, str, VelaIni]:
        """(accelerator, system config, memory mode, vela.ini by content): what Vela's
        per-operation formulas depend on; the pool size is not among them."""
        return (self.accelerator, self.system_config, self.memory_mode, self.vela_ini)

    @property
    def arch(self) -> ArchitectureFeatures:
        """Vela's view of this system, for its performance model."""
        return system_arch(
            self.accelerator,
            self.system_config,
            self.memory_mode,
            self.sram_bytes,
            self.vela_ini,
        )

    def __hash__(self) -> int:
        return hash((self.accelerator, self.system_config, self.memory_mode, self.sram_bytes,
                     self.vela_ini))  # fmt: skip


def system_memory(
    accelerator: str,
    system_config: str,
    memory_mode: str,
    sram_bytes: int,
    config_path: str | Path | VelaIni | None = None,
) -> SystemMemory:
    """The memory system of `accelerator` under a vela.ini (Vela's shipped one by default).
    DeviceConfigError lists the valid names when one is wrong, and says why when Vela or the
    accelerator cannot take the combination or the pool size (`vela_arch.system_arch`)."""
    ini = vela_ini(config_path if config_path is not None else DEFAULT_VELA_INI)
    arch = system_arch(accelerator, system_config, memory_mode, int(sram_bytes), ini)
    roles = {
        "constants": AREA_NAMES[arch.permanent_storage_mem_area],
        "io": AREA_NAMES[arch.feature_map_storage_mem_area],
        "cascade": AREA_NAMES[arch.fast_storage_mem_area],
    }
    regions = {area: _region(arch, area, sram_bytes) for area in sorted(set(roles.values()))}
    return SystemMemory(
        accelerator=accelerator,
        system_config=system_config,
        memory_mode=memory_mode,
        sram_bytes=int(sram_bytes),
        core_clock_hz=float(arch.core_clock),
        regions=regions,
        roles=roles,
        vela_ini=ini,
    )


def _region(arch: ArchitectureFeatures, area: str, sram_bytes: int) -> MemoryRegion:
    mem = next(m for m, name in AREA_NAMES.items() if name == area)
    bandwidth = float(arch.memory_bandwidths_per_cycle[mem])
    return MemoryRegion(
        name=area,
        size=int(sram_bytes) if mem == MemArea.Sram else int(arch.max_address_offset),
        read_bandwidth=bandwidth,
        write_bandwidth=bandwidth,
        read_latency=int(arch.memory_latency[mem][BandwidthDirection.Read]),
        write_latency=int(arch.memory_latency[mem][BandwidthDirection.Write]),
        burst_length=int(arch.memory_burst_length[mem]),
    )
