"""Device defaults shared by every command: Vela's flag names, the family's usual system."""

from __future__ import annotations

DEFAULT_ACCELERATOR = "ethos-u55-256"
U55_SYSTEM_CONFIG = "Ethos_U55_High_End_Embedded"
U55_MEMORY_MODE = "Shared_Sram"
U65_SYSTEM_CONFIG = "Ethos_U65_High_End"
U65_MEMORY_MODE = "Dedicated_Sram"
DEFAULT_OBJECTIVES = "cycles,sram"
SRAM_MIN = 32 * 1024  # a new study's pool range, bytes
SRAM_MAX = 4 * 1024 * 1024


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
