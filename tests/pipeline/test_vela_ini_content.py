"""A vela.ini is known by its bytes, not its path: a file changed in place is read again, so a
session scores a point with the bandwidths the file says now."""

from __future__ import annotations

from pathlib import Path

from cascader.core.options import CascaderOptions
from cascader.estimate import Device, PointConfig
from cascader.ethosu.memory import system_memory
from cascader.ethosu.vela_arch import DEFAULT_VELA_INI, vela_ini
from cascader.pipeline import Session
from cascader.testing.networks import residual

SYSTEM = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
POINT = PointConfig(64 * 1024, CascaderOptions(cost_model="vela", enable_striping=True))


def _slower_flash(text: str) -> str:
    """The same vela.ini with the U55 high-end system's flash (the weights' home) 8x slower."""
    section = text.index("[System_Config.Ethos_U55_High_End_Embedded]")
    line = "OffChipFlash_clock_scale=0.125"
    at = text.index(line, section)
    return text[:at] + "OffChipFlash_clock_scale=0.015625" + text[at + len(line) :]


def test_a_vela_ini_changed_at_the_same_path_is_rescored(tmp_path: Path) -> None:
    ini = tmp_path / "vela.ini"
    original = DEFAULT_VELA_INI.read_text()
    ini.write_text(original)
    session = Session(residual().build(), Device(*SYSTEM, str(ini)))
    before = session.score(POINT)
    first = vela_ini(ini)

    ini.write_text(_slower_flash(original))  # same path, other bytes
    after = session.score(POINT)
    assert vela_ini(ini).sha256 != first.sha256
    assert system_memory(*SYSTEM, POINT.sram_bytes, ini).vela_ini != first
    assert after.total_cycles != before.total_cycles

    elsewhere = tmp_path / "slow.ini"  # the changed file, never seen at its path before
    elsewhere.write_text(_slower_flash(original))
    cold = Session(residual().build(), Device(*SYSTEM, str(elsewhere))).score(POINT)
    assert after.total_cycles == cold.total_cycles
    assert after.bytes == cold.bytes
