"""Vela's ArchitectureFeatures, built quietly and cached: the one source of hardware constants
(SHRAM banks, micro-blocks, output cycle tables) and of memory-system numbers (vela.ini)."""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ethosu.vela import architecture_features as vela_arch
from ethosu.vela.api import NpuAccelerator
from ethosu.vela.architecture_features import Accelerator, ArchitectureFeatures
from ethosu.vela.errors import VelaError

from cascader.ethosu.errors import DeviceConfigError
from cascader.memo import memo_function

# The Ethos-U55/U65 variants the legacy performance model covers (Ethos-U85 is a later issue).
ACCELERATORS: tuple[str, ...] = (
    "ethos-u55-32",
    "ethos-u55-64",
    "ethos-u55-128",
    "ethos-u55-256",
    "ethos-u65-256",
    "ethos-u65-512",
)
# Every accelerator Vela 5.2 compiles for (its Accelerator enum, in its order): its C++ core
# (regor) takes them all, Ethos-U85 included, though the device model above covers U55/U65 only.
VELA_ACCELERATORS: tuple[str, ...] = (
    *ACCELERATORS,
    "ethos-u85-128",
    "ethos-u85-256",
    "ethos-u85-512",
    "ethos-u85-1024",
    "ethos-u85-2048",
)
DEFAULT_VELA_INI = Path(vela_arch.CONFIG_FILES_PATH) / "Arm" / "vela.ini"
MAX_VELA_INI_BYTES = 1 << 20  # Vela's own vela.ini is 10 KiB
# Vela's own system configs are named after the family they are for.
_FAMILIES = ("Ethos_U55_", "Ethos_U65_", "Ethos_U85_")


class VelaConfigError(DeviceConfigError):
    """A vela.ini, system config, memory mode or SRAM pool that Vela cannot use, or one not
    meant for the accelerator; the message says which and what to do (and never quotes the
    file, which may be any file the user named)."""

    def __init__(self, what: str, name: str, problem: str) -> None:
        super().__init__(what, name, ())
        self.args = (f"{what} {name}: {problem}",)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Vela prints warnings and summaries to stdout; keep them out of our `--json` output."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def check_accelerator(name: str) -> str:
    if name not in ACCELERATORS:
        raise DeviceConfigError("accelerator config", name, ACCELERATORS)
    return name


def check_vela_accelerator(name: str) -> str:
    """An accelerator name Vela's own compiler accepts (any of VELA_ACCELERATORS)."""
    if name not in VELA_ACCELERATORS:
        raise DeviceConfigError("accelerator config", name, VELA_ACCELERATORS)
    return name


def npu_accelerator(name: str) -> NpuAccelerator:
    """The public-API enum for an accelerator name, e.g. ethos-u55-256 -> Ethos_U55_256."""
    return NpuAccelerator[check_accelerator(name).replace("ethos-u", "Ethos_U").replace("-", "_")]


@memo_function(len(ACCELERATORS))
def default_arch(accelerator: str) -> ArchitectureFeatures:
    """The arch Vela's public API (npu_find_block_configs) itself uses for this accelerator
    (Vela keeps one per accelerator, so this does too, and hot paths skip the silencing);
    creating it here, silenced, also keeps Vela's first-use warnings off stdout."""
    with quiet():
        return vela_arch.create_default_arch(Accelerator(check_accelerator(accelerator)))


@dataclass(frozen=True)
class VelaIni:
    """A vela.ini as read once: its path and its bytes' sha256, which every memo of what the
    file says is keyed by (as a model is keyed by its hash), so a different file at the same
    path is read afresh and never scored with the old one's numbers. Path-like."""

    path: Path
    sha256: str
    text: str = field(compare=False, repr=False)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


def vela_ini(config_path: str | Path | VelaIni = DEFAULT_VELA_INI) -> VelaIni:
    """The vela.ini at `config_path` as it is now: only a regular file of at most
    MAX_VELA_INI_BYTES of UTF-8 text (Vela would read a FIFO or /dev/zero for ever). A
    VelaIni is returned as it is (it was read when it was made)."""
    if isinstance(config_path, VelaIni):
        return config_path
    what = "vela config file"
    try:
        fd = os.open(config_path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise DeviceConfigError(what, str(config_path), [str(DEFAULT_VELA_INI)]) from None
    except OSError as err:
        raise VelaConfigError(what, str(config_path), f"cannot be read ({err.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise VelaConfigError(what, str(config_path), "is not a regular file; give a vela.ini")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_VELA_INI_BYTES + 1)
    if len(data) > MAX_VELA_INI_BYTES:
        raise VelaConfigError(
            what, str(config_path), f"is over {MAX_VELA_INI_BYTES >> 10} KiB; give a vela.ini"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise VelaConfigError(what, str(config_path), "is not text; give a vela.ini") from None
    return VelaIni(Path(config_path), hashlib.sha256(data).hexdigest(), text)


@memo_function(16)
def _read_ini(ini: VelaIni) -> configparser.ConfigParser:
    """The parsed vela.ini (its parse error names the section problem, never quoting the
    offending line of whatever file it was given)."""
    parser = configparser.ConfigParser()
    try:
        parser.read_string(ini.text, str(ini))
    except configparser.Error as err:
        line = getattr(err, "lineno", None)
        at = f" at line {line}" if line else ""
        raise VelaConfigError(
            "vela config file",
            str(ini),
            f"is not a vela.ini ({type(err).__name__}{at}); give a vela.ini with "
            "[System_Config.*] and [Memory_Mode.*] sections",
        ) from None
    return parser


def _ini_sections(config_path: str | Path | VelaIni, prefix: str) -> tuple[str, ...]:
    parser = _read_ini(vela_ini(config_path))
    return tuple(s[len(prefix) :] for s in parser.sections() if s.startswith(prefix))


def system_configs(config_path: str | Path | VelaIni = DEFAULT_VELA_INI) -> tuple[str, ...]:
    """Names of the [System_Config.*] sections of a vela.ini."""
    return _ini_sections(config_path, "System_Config.")


def memory_modes(config_path: str | Path | VelaIni = DEFAULT_VELA_INI) -> tuple[str, ...]:
    """Names of the [Memory_Mode.*] sections of a vela.ini."""
    return _ini_sections(config_path, "Memory_Mode.")


def system_arch(
    accelerator: str,
    system_config: str,
    memory_mode: str,
    arena_cache_size: int | None,
    config_path: str | Path | VelaIni = DEFAULT_VELA_INI,
) -> ArchitectureFeatures:
    """Vela's own reading of a vela.ini system config x memory mode for one accelerator, with
    the arena cache size (the SRAM pool) overriding the memory mode's, as Vela's CLI does.
    A combination Vela refuses, or one the accelerator cannot run, is a VelaConfigError.
    Kept per the file's content (`VelaIni`): a path is read again on every call."""
    check_accelerator(accelerator)
    return _system_arch(accelerator, system_config, memory_mode, arena_cache_size,
                        vela_ini(config_path))  # fmt: skip


@memo_function(64)
def _system_arch(
    accelerator: str, system_config: str, memory_mode: str, arena: int | None, ini: VelaIni
) -> ArchitectureFeatures:
    return _vela_arch(accelerator, system_config, memory_mode, arena, ini)


def check_vela_system(
    accelerator: str,
    system_config: str,
    memory_mode: str,
    config_path: str | Path | VelaIni = DEFAULT_VELA_INI,
    arena_cache_size: int | None = None,
) -> ArchitectureFeatures:
    """`system_arch` for any accelerator Vela compiles for, Ethos-U85 included (Vela's
    ArchitectureFeatures reads an Ethos-U85's memory system too; only the legacy core's
    hardware tables are missing, and the C++ core does not need them). Bad names, a system
    config of another family, or a combination Vela refuses raise a one-line DeviceConfigError
    or VelaConfigError listing the valid choices."""
    check_vela_accelerator(accelerator)
    return _system_arch(accelerator, system_config, memory_mode, arena_cache_size,
                        vela_ini(config_path))  # fmt: skip


def _vela_arch(
    accelerator: str,
    system_config: str,
    memory_mode: str,
    arena_cache_size: int | None,
    config_path: VelaIni,
) -> ArchitectureFeatures:
    if system_config not in system_configs(config_path):
        raise DeviceConfigError("system config", system_config, system_configs(config_path))
    if memory_mode not in memory_modes(config_path):
        raise DeviceConfigError("memory mode", memory_mode, memory_modes(config_path))
    _check_family(accelerator, system_config, config_path)
    limit = 1 << (32 if accelerator.startswith("ethos-u55") else 40)
    if arena_cache_size is not None and not 0 < arena_cache_size <= limit:
        raise VelaConfigError(
            "SRAM pool",
            f"of {arena_cache_size} bytes",
            f"must be 1 byte to the {limit >> 30} GiB an {accelerator} addresses; give a "
            "smaller size",
        )
    try:
        with quiet():
            arch = ArchitectureFeatures(
                vela_config_files=[str(config_path)],
                accelerator_config=accelerator,
                system_config=system_config,
                memory_mode=memory_mode,
                max_blockdep=ArchitectureFeatures.MAX_BLOCKDEP,
                verbose_config=False,
                arena_cache_size=arena_cache_size,
            )
    except (VelaError, ValueError, KeyError, TypeError, ArithmeticError) as err:
        reason = err.error_msg if isinstance(err, VelaError) else f"{type(err).__name__}: {err}"
        raise VelaConfigError(
            "system config",
            f"{system_config} with memory mode {memory_mode} ({Path(config_path).name})",
            f"Vela refuses it ({' '.join(str(reason).split())[:160]}); pick another memory "
            "mode or fix the vela.ini",
        ) from None
    if arch.is_ethos_u55_system and arch.is_spilling_enabled():
        raise VelaConfigError(
            "memory mode",
            memory_mode,
            f"keeps the arena outside the SRAM, with the SRAM as its cache, which the "
            f"{accelerator} cannot do (Ethos-U65 only); use Shared_Sram or Sram_Only",
        )
    return arch


def _check_family(accelerator: str, system_config: str, config_path: VelaIni) -> None:
    """A system config named after another Ethos-U family (Vela's own are) describes that
    family's memory system, not this accelerator's."""
    family = "Ethos_" + accelerator.split("-")[1].upper() + "_"
    theirs = next((f for f in _FAMILIES if system_config.startswith(f)), None)
    if theirs is not None and theirs != family:
        ours = [c for c in system_configs(config_path) if c.startswith(family)]
        raise VelaConfigError(
            "system config",
            system_config,
            f"is for the {theirs[:-1].replace('_', '-')}, not the {accelerator}; use "
            f"{' or '.join(ours) or 'a system config for it'}",
        )
