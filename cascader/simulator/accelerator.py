"""The few properties of an Ethos-U55/U65 configuration that change what a command stream
does: cores (per-core weight/scale streams), micro-block depths (the weight stream's
traversal), SHRAM size (where the LUT lives) and the DMA/kernel queue depths (hazards).
They come from Vela's own architecture tables, so they cannot drift from the compiler."""

from __future__ import annotations

from dataclasses import dataclass

from ethosu.vela.architecture_features import Accelerator, ArchitectureFeatures

from cascader.memo import memo_function
from cascader.simulator.errors import SimulationError

_SHRAM_BANK_BYTES = 1024
_LUT_BYTES = 2048  # the activation LUT occupies the top 2 KiB of SHRAM
_DMA_QUEUE = {"ethos-u55": 1, "ethos-u65": 2}  # outstanding DMA jobs the hardware holds
_KERNEL_QUEUE = 2  # outstanding kernel jobs


@dataclass(frozen=True)
class AcceleratorConfig:
    """One accelerator variant, e.g. ethos-u55-256."""

    name: str
    cores: int
    ifm_ublock_depth: int
    ofm_ublock_depth: int
    shram_bytes: int
    dma_queue: int
    kernel_queue: int = _KERNEL_QUEUE

    @property
    def is_u65(self) -> bool:
        return self.name.startswith("ethos-u65")

    @property
    def lut_base(self) -> int:
        """SHRAM address of LUT slot 0."""
        return self.shram_bytes - _LUT_BYTES

    @property
    def lut_shares_banks(self) -> bool:
        """Small SHRAMs have no spare banks: any op without a LUT may overwrite it."""
        return self.shram_bytes // _SHRAM_BANK_BYTES <= 16

    @property
    def address_bits(self) -> int:
        return 40 if self.is_u65 else 32


@memo_function(None)
def accelerator_config(name: str) -> AcceleratorConfig:
    """The configuration of an Ethos-U55/U65 variant named as Vela names it."""
    try:
        accelerator = Accelerator(name)
    except ValueError:
        raise SimulationError(f"unknown accelerator {name!r}") from None
    family = name.rsplit("-", 1)[0]
    if family not in _DMA_QUEUE:
        raise SimulationError(f"{name}: only Ethos-U55 and Ethos-U65 are simulated")
    config = ArchitectureFeatures.accelerator_configs[accelerator]
    return AcceleratorConfig(
        name=name,
        cores=config.cores,
        ifm_ublock_depth=config.ifm_ublock.depth,
        ofm_ublock_depth=config.ofm_ublock.depth,
        shram_bytes=config.shram_banks * _SHRAM_BANK_BYTES,
        dma_queue=_DMA_QUEUE[family],
    )
