"""The design space: one SRAM pool size plus the cascader options a sweep may change."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import optuna

from dse.errors import BadInput
from dse.sizes import format_size

SRAM_ALIGN = 16
STRIPE_FACTORS = (2, 3, 4, 5, 6, 8)
MAX_PLAN_SIZES = (2, 4, 6, 8, 10, 14)
MAX_PROPOSALS = (16, 32, 64, 128)
ALWAYS_COPY_SIZES = (0, 256, 1024, 4096, 16384)


@dataclass(frozen=True)
class DesignPoint:
    """Everything a trial chooses; with the study's fixed settings it rebuilds one schedule."""

    sram_pool_bytes: int
    enable_striping: bool = True
    enable_multi_dimensional_striping: bool = False
    stripe_factors: int = 5
    max_plan_size: int = 10
    max_proposals: int = 64
    always_copy_size: int = 1024

    def cascader_options(self) -> dict[str, int | bool]:
        """The cascader options of this point (everything but the pool size)."""
        options = asdict(self)
        del options["sram_pool_bytes"]
        return options

    def to_json(self) -> dict[str, int | bool]:
        return asdict(self)


def align_down(nbytes: int, align: int = SRAM_ALIGN) -> int:
    return nbytes - nbytes % align


@dataclass(frozen=True)
class SearchSpace:
    """Bounds of the sweep. The pool is sampled log-uniformly: halving SRAM matters as much at
    64 KiB as at 2 MiB."""

    sram_min: int
    sram_max: int

    def __post_init__(self) -> None:
        if self.sram_min > self.sram_max:
            raise BadInput(
                f"--sram-min ({format_size(self.sram_min)}) is larger than --sram-max "
                f"({format_size(self.sram_max)}); swap them or widen the range"
            )
        if align_down(self.sram_max) < max(self.sram_min, SRAM_ALIGN):
            raise BadInput(
                f"no {SRAM_ALIGN}-byte aligned pool size lies between --sram-min and --sram-max;"
                " widen the range"
            )

    @property
    def low(self) -> int:
        return max(SRAM_ALIGN, -(-self.sram_min // SRAM_ALIGN) * SRAM_ALIGN)

    @property
    def high(self) -> int:
        return align_down(self.sram_max)

    def suggest(self, trial: optuna.trial.BaseTrial) -> DesignPoint:
        """Ask the trial for a point; the pool is drawn in 16-byte units so it stays aligned."""
        units = trial.suggest_int(
            "sram_units", self.low // SRAM_ALIGN, self.high // SRAM_ALIGN, log=True
        )
        return DesignPoint(
            sram_pool_bytes=units * SRAM_ALIGN,
            enable_striping=trial.suggest_categorical("enable_striping", [True, False]),
            enable_multi_dimensional_striping=trial.suggest_categorical(
                "enable_multi_dimensional_striping", [False, True]
            ),
            stripe_factors=trial.suggest_categorical("stripe_factors", list(STRIPE_FACTORS)),
            max_plan_size=trial.suggest_categorical("max_plan_size", list(MAX_PLAN_SIZES)),
            max_proposals=trial.suggest_categorical("max_proposals", list(MAX_PROPOSALS)),
            always_copy_size=trial.suggest_categorical("always_copy_size", list(ALWAYS_COPY_SIZES)),
        )

    def sram_ladder(self, steps_per_octave: int = 2) -> list[int]:
        """Aligned pool sizes spaced evenly in log scale, both ends included (grid and baseline)."""
        octaves = math.log2(self.high / self.low) if self.high > self.low else 0.0
        count = max(1, math.ceil(octaves * steps_per_octave)) + 1
        sizes = {
            align_down(round(self.low * 2 ** (octaves * i / (count - 1))))
            if count > 1
            else self.low
            for i in range(count)
        }
        return sorted(s for s in sizes if self.low <= s <= self.high)

    def seed_points(self, count: int) -> list[dict]:
        """Up to `count` fully fixed trials spread over the pool ladder at the cascader's
        default options: a spine across the whole SRAM range before the sampler takes over
        (random start-up trials cluster by chance)."""
        ladder = self.sram_ladder()
        if count <= 0:
            return []
        if count == 1:
            picks = [ladder[-1]]
        else:
            picks = sorted(
                {ladder[round(i * (len(ladder) - 1) / (count - 1))] for i in range(count)}
            )
        defaults = DesignPoint(SRAM_ALIGN).cascader_options()
        return [{"sram_units": size // SRAM_ALIGN, **defaults} for size in picks]

    def grid(self) -> dict[str, list]:
        """A small exhaustive grid for GridSampler: the pool ladder x striping switches; the
        other options stay at their defaults (one value each)."""
        return {
            "sram_units": [s // SRAM_ALIGN for s in self.sram_ladder()],
            "enable_striping": [True, False],
            "enable_multi_dimensional_striping": [False, True],
            "stripe_factors": [5],
            "max_plan_size": [10],
            "max_proposals": [64],
            "always_copy_size": [1024],
        }
