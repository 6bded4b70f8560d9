"""Vela's ArchitectureFeatures, built quietly and cached: the one source of hardware constants
(SHRAM banks, micro-blocks, output cycle tables) and of memory-system numbers (vela.ini)."""

from __future__ import annotations

import configparser
import contextlib
import io
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from ethosu.vela import architecture_features as vela_arch
from ethosu.vela.api import NpuAccelerator
from ethosu.vela.architecture_features import Accelerator, ArchitectureFeatures

from cascader.ethosu.errors import DeviceConfigError

# The Ethos-U55/U65 variants the legacy performance model covers (Ethos-U85 is a later issue).
ACCELERATORS: tuple[str, ...] = (
    "ethos-u55-32",
    "ethos-u55-64",
    "ethos-u55-128",
    "ethos-u55-256",
    "ethos-u65-256",
    "ethos-u65-512",
)
DEFAULT_VELA_INI = Path(vela_arch.CONFIG_FILES_PATH) / "Arm" / "vela.ini"


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Vela prints warnings and summaries to stdout; keep them out of our `--json` output."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def check_accelerator(name: str) -> str:
    if name not in ACCELERATORS:
        raise DeviceConfigError("accelerator config", name, ACCELERATORS)
    return name


def npu_accelerator(name: str) -> NpuAccelerator:
    """The public-API enum for an accelerator name, e.g. ethos-u55-256 -> Ethos_U55_256."""
    return NpuAccelerator[check_accelerator(name).replace("ethos-u", "Ethos_U").replace("-", "_")]


@lru_cache(maxsize=len(ACCELERATORS))
def default_arch(accelerator: str) -> ArchitectureFeatures:
    """The arch Vela's public API (npu_find_block_configs) itself uses for this accelerator
    (Vela keeps one per accelerator, so this does too, and hot paths skip the silencing);
    creating it here, silenced, also keeps Vela's first-use warnings off stdout."""
    with quiet():
        return vela_arch.create_default_arch(Accelerator(check_accelerator(accelerator)))


def _ini_sections(config_path: Path, prefix: str) -> tuple[str, ...]:
    parser = configparser.ConfigParser()
    parser.read(config_path)
    return tuple(s[len(prefix) :] for s in parser.sections() if s.startswith(prefix))


@lru_cache(maxsize=16)
def system_configs(config_path: Path = DEFAULT_VELA_INI) -> tuple[str, ...]:
    """Names of the [System_Config.*] sections of a vela.ini."""
    return _ini_sections(config_path, "System_Config.")


@lru_cache(maxsize=16)
def memory_modes(config_path: Path = DEFAULT_VELA_INI) -> tuple[str, ...]:
    """Names of the [Memory_Mode.*] sections of a vela.ini."""
    return _ini_sections(config_path, "Memory_Mode.")


@lru_cache(maxsize=64)
def system_arch(
    accelerator: str,
    system_config: str,
    memory_mode: str,
    arena_cache_size: int | None,
    config_path: Path = DEFAULT_VELA_INI,
) -> ArchitectureFeatures:
    """Vela's own reading of a vela.ini system config x memory mode for one accelerator, with
    the arena cache size (the SRAM pool) overriding the memory mode's, as Vela's CLI does."""
    check_accelerator(accelerator)
    if not Path(config_path).is_file():
        raise DeviceConfigError("vela config file", str(config_path), [str(DEFAULT_VELA_INI)])
    if system_config not in system_configs(config_path):
        raise DeviceConfigError("system config", system_config, system_configs(config_path))
    if memory_mode not in memory_modes(config_path):
        raise DeviceConfigError("memory mode", memory_mode, memory_modes(config_path))
    with quiet():
        return ArchitectureFeatures(
            vela_config_files=[str(config_path)],
            accelerator_config=accelerator,
            system_config=system_config,
            memory_mode=memory_mode,
            max_blockdep=ArchitectureFeatures.MAX_BLOCKDEP,
            verbose_config=False,
            arena_cache_size=arena_cache_size,
        )
