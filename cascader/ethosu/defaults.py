"""What this tool runs when nothing is said: the accelerator, each family's usual system
config and memory mode (Vela's names), and the cascader options of a design point."""

from __future__ import annotations

from cascader.core.options import CascaderOptions

DEFAULT_ACCELERATOR = "ethos-u55-256"
U55_SYSTEM_CONFIG = "Ethos_U55_High_End_Embedded"
U55_MEMORY_MODE = "Shared_Sram"
U65_SYSTEM_CONFIG = "Ethos_U65_High_End"
U65_MEMORY_MODE = "Dedicated_Sram"
# Vela's own defaults for an Ethos-U85 (ArchitectureFeatures' internal-default config).
U85_SYSTEM_CONFIG = "Ethos_U85_SYS_DRAM_Mid"
U85_MEMORY_MODE = "Dedicated_Sram_384KB"

# The cascader's options at a design point: the original backend's, with striping on (the
# point of cascading on a microNPU is to stripe).
POINT_OPTIONS = CascaderOptions(enable_striping=True)


def system_defaults(
    accelerator: str, system_config: str | None, memory_mode: str | None
) -> tuple[str, str]:
    """The system config and memory mode as given, else the accelerator family's default
    (an Ethos-U65 normally runs with its arena in DRAM and SRAM as a cache; an Ethos-U85
    gets Vela's own default, a DRAM system with a 384 KiB SRAM cache)."""
    if accelerator.startswith("ethos-u85"):
        family = U85_SYSTEM_CONFIG, U85_MEMORY_MODE
    elif accelerator.startswith("ethos-u65"):
        family = U65_SYSTEM_CONFIG, U65_MEMORY_MODE
    else:
        family = U55_SYSTEM_CONFIG, U55_MEMORY_MODE
    return system_config or family[0], memory_mode or family[1]
