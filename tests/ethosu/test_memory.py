"""MemoryRegions from Vela's vela.ini system configs and memory modes."""

from __future__ import annotations

import pytest

from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.memory import memory_modes, system_configs, system_memory


def test_shared_sram_keeps_activations_in_sram_and_constants_in_flash():
    memory = system_memory("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", 256 << 10)
    assert memory.roles == {"constants": "offchip_flash", "io": "sram", "cascade": "sram"}
    sram, flash = memory.region("cascade"), memory.region("constants")
    assert sram.size == 256 << 10
    assert (sram.read_bandwidth, sram.read_latency, sram.burst_length) == (8.0, 32, 32)
    assert (flash.read_bandwidth, flash.read_latency, flash.burst_length) == (1.0, 64, 128)
    assert memory.core_clock_hz == 500e6


def test_dedicated_sram_puts_activations_in_dram_and_the_cache_in_sram():
    memory = system_memory("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", 384 << 10)
    assert memory.region("io").name == "dram"
    assert memory.region("constants").name == "dram"
    assert memory.region("cascade").name == "sram"
    assert memory.region("cascade").size == 384 << 10
    assert memory.region("io").read_bandwidth == pytest.approx(16 * 0.234375)
    assert memory.region("io").read_latency == 500


def test_the_sram_pool_overrides_the_memory_modes_arena_cache_size():
    memory = system_memory("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram_512KB", 64 << 10)
    assert memory.region("cascade").size == 64 << 10
    assert memory.arch.arena_cache_size == 64 << 10


def test_sram_only_reads_constants_from_on_chip_flash_at_sram_speed():
    memory = system_memory("ethos-u55-128", "Ethos_U55_Deep_Embedded", "Sram_Only", 1 << 20)
    assert memory.constants_area == "onchip_flash"
    assert memory.region("constants").read_bandwidth == memory.region("io").read_bandwidth


@pytest.mark.parametrize(
    ("args", "what", "valid"),
    [
        (
            ("ethos-u99", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
            "accelerator",
            "ethos-u55-256",
        ),
        (("ethos-u55-256", "Nope", "Shared_Sram"), "system config", "Ethos_U65_High_End"),
        (("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Nope"), "memory mode", "Dedicated_Sram"),
    ],
)
def test_bad_names_list_the_valid_ones(args, what, valid):
    with pytest.raises(DeviceConfigError, match=what) as err:
        system_memory(*args, 1 << 20)
    assert valid in str(err.value)


def test_names_come_from_the_ini():
    assert "Ethos_U55_High_End_Embedded" in system_configs()
    assert {"Sram_Only", "Shared_Sram", "Dedicated_Sram"} <= set(memory_modes())
