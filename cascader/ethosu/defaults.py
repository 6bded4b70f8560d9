"""What this tool runs when nothing is said: the accelerator, each family's usual system
config and memory mode (Vela's names), and the cascader options of a design point."""

from __future__ import annotations

from cascader.core.options import CascaderOptions

DEFAULT_ACCELERATOR = "ethos-u55-256"
U55_SYSTEM_CONFIG = "Ethos_U55_High_End_Embedded"
U55_MEMORY_MODE = "Shared_Sram"
U65_SYSTEM_CONFIG = "Ethos_U65_High_End"
U65_MEMORY_MODE = "Dedicated_Sram"

# The cascader's options at a design point: the original backend's, with striping on (the
# point of cascading on a microNPU is to stripe).
POINT_OPTIONS = CascaderOptions(enable_striping=True)


def system_defaults(
    accelerator: str, system_config: str | None, memory_mode: str | None
) -> tuple[str, str]:
    """The system config and memory mode as given, else the accelerator family's default
    (an Ethos-U65 normally runs with its arena in DRAM and SRAM as a cache)."""
    u65 = accelerator.startswith("ethos-u65")
    return (
        system_config or (U65_SYSTEM_CONFIG if u65 else U55_SYSTEM_CONFIG),
        memory_mode or (U65_MEMORY_MODE if u65 else U55_MEMORY_MODE),
    )
