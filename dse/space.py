"""The design space: one SRAM pool size plus the cascader options a sweep may change."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import optuna

from cascader.core.options import COST_MODELS
from cascader.estimate import PointConfig
from cascader.ethosu.defaults import POINT_OPTIONS
from cascader.ethosu.vela_compiler import ALLOCATORS, FEATURES, OPTIMISE, VelaOptions
from cascader.ir.units import ALIGN
from dse.errors import BadInput
from dse.sizes import format_size

SRAM_ALIGN = ALIGN  # pools are whole NPU address units
STRIPE_FACTORS = (2, 3, 4, 5, 6, 8)
MAX_PLAN_SIZES = (2, 4, 6, 8, 10, 14)
MAX_PROPOSALS = (16, 32, 64, 128)
ALWAYS_COPY_SIZES = (0, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
# Who makes a point's schedule: this project's cascader (scored by Vela's performance model)
# or Vela's own compiler (its C++ core, scored by its own performance report).
PRODUCERS = ("cascader", "vela")
# The arena sizes of Vela's own dense sweeps (../shared/baselines): 16 KiB to 4 MiB in steps
# of 1.5x and 4/3x; a study's `vela` seeds are these, so its front holds every such point.
VELA_LADDER = tuple(k * 1024 for k in (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
                                       1024, 1536, 2048, 3072, 4096))  # fmt: skip


@dataclass(frozen=True)
class DesignPoint:
    """Everything a trial chooses; with the study's fixed settings it rebuilds one schedule."""

    sram_pool_bytes: int
    enable_cascader: bool = True
    enable_striping: bool = POINT_OPTIONS.enable_striping
    enable_multi_dimensional_striping: bool = POINT_OPTIONS.enable_multi_dimensional_striping
    stripe_factors: int = POINT_OPTIONS.stripe_factors
    max_plan_size: int = POINT_OPTIONS.max_plan_size
    max_proposals: int = POINT_OPTIONS.max_proposals
    always_copy_size: int = POINT_OPTIONS.always_copy_size
    cost_model: str = POINT_OPTIONS.cost_model
    # With the cascader off: copy weights into SRAM where Vela's scheduler would, or read
    # them all in place (the smallest layer-by-layer schedule). Cascaded points keep True.
    buffer_weights: bool = True
    # Feature maps whose channel count is not a multiple of 16 stored NHWC, not in 16-channel
    # bricks: bricks pad them (8 channels take 16), so the smallest schedules shrink at about
    # the same cycles. A `vela` point keeps False (Vela chooses its own layouts).
    narrow_nhwc: bool = False
    # A mean over H and W summing each row first, then the row sums (cascader.schedule.
    # row_sums): its input then runs in row stripes with the layers before it (DS-CNN's
    # floor) for one more small op. A `vela` point keeps False.
    row_sum_mean: bool = False
    # A `vela` point is Vela's compiler with the pool as its arena size limit and these
    # options; the cascader's fields above keep their defaults there.
    producer: str = "cascader"
    vela_optimise: str = "Performance"
    vela_disabled: tuple[str, ...] = ()
    vela_allocator: str = ALLOCATORS[0]

    def __post_init__(self) -> None:
        # A stored point's JSON gives a list; points are keys of memo tables.
        object.__setattr__(self, "vela_disabled", tuple(self.vela_disabled))

    def cascader_options(self) -> dict[str, int | bool]:
        """The cascader options of this point (everything but the pool size, the switch, the
        layer-by-layer weight buffering, the network's form (narrow feature maps, row sums)
        and the producer's;
        a point with the cascader off or of another producer keeps them at their defaults)."""
        options = asdict(self)
        for name in _NOT_CASCADER_OPTIONS:
            del options[name]
        return options

    def vela_options(self, accelerator: str, system_config: str, memory_mode: str,
                     config_path: str | None) -> VelaOptions:  # fmt: skip
        """The Vela compile of a `vela` point on the device."""
        return VelaOptions(accelerator, system_config, memory_mode, config_path,
                           self.vela_optimise, self.sram_pool_bytes, self.vela_disabled,
                           self.vela_allocator)  # fmt: skip

    def config(self, proposal_region_bytes: int | None = None) -> PointConfig:
        """The point as the pipeline schedules it, its proposals generated for a cascade
        region of `proposal_region_bytes` (a study's largest pool)."""
        options = (
            replace(POINT_OPTIONS, **self.cascader_options()) if self.enable_cascader else None
        )
        return PointConfig(self.sram_pool_bytes, options, proposal_region_bytes,
                           self.buffer_weights, self.narrow_nhwc, self.row_sum_mean)  # fmt: skip

    def to_json(self) -> dict:
        data = asdict(self)
        data["vela_disabled"] = list(self.vela_disabled)
        return data


_NOT_CASCADER_OPTIONS = ("sram_pool_bytes", "enable_cascader", "buffer_weights", "narrow_nhwc",
                         "row_sum_mean", "producer", "vela_optimise", "vela_disabled",
                         "vela_allocator")  # fmt: skip


# The options of the smallest schedules (pool size 0): stripes tiled over every axis keep
# interior buffers a few bricks wide, and weights stay in flash unless a copy pays for itself.
# On mobilenet_v2_100_224 (ethos-u55-256, Shared_Sram) they fit in 250.4 KiB, where the default
# options need 355.9 KiB and Vela's --optimise Size 353.5 KiB (tests/schedule/test_floor.py).
# Two stripe factors (each axis whole or one output quantum) reach the floor of five in a
# fifth of the cascader's time (MobileNetV2: 0.4 s against 1.8 s), as the floor's stripes
# are one quantum; the sampler then starts its multi-dimensional draws from that cheaper
# neighbourhood.
SMALLEST = DesignPoint(
    0, enable_multi_dimensional_striping=True, stripe_factors=2, always_copy_size=0
)


def align_down(nbytes: int, align: int = SRAM_ALIGN) -> int:
    return nbytes - nbytes % align


@dataclass(frozen=True)
class SearchSpace:
    """Bounds of the sweep. The pool is sampled log-uniformly: halving SRAM matters as much at
    64 KiB as at 2 MiB."""

    sram_min: int
    sram_max: int
    # Models can also be scheduled without the cascader (Vela-like layer by layer, weights
    # buffered as Vela does): the point that wins when the whole network fits. Graph studies
    # only have the cascader.
    cascader_optional: bool = False
    # Who may make a point's schedule (PRODUCERS); Ethos-U85 has only Vela's compiler.
    producers: tuple[str, ...] = ("cascader",)
    # The model has a mean the `row_sum_mean` option splits (dse.mean_rows): only then is
    # the option asked for and seeded, so other models keep the same space.
    row_sum_mean: bool = False

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
        """Ask the trial for a point; the pool is drawn in 16-byte units so it stays aligned.
        Every parameter of the study's producers is asked for, whichever produces the point
        (as for the cascader's options with the cascader off, below)."""
        units = trial.suggest_int(
            "sram_units", self.low // SRAM_ALIGN, self.high // SRAM_ALIGN, log=True
        )
        producer = (
            trial.suggest_categorical("producer", list(self.producers))
            if len(self.producers) > 1
            else self.producers[0]
        )
        if "vela" in self.producers:
            vela = DesignPoint(
                units * SRAM_ALIGN,
                producer="vela",
                vela_optimise=trial.suggest_categorical("vela_optimise", list(OPTIMISE)),
                vela_disabled=tuple(
                    f for f in FEATURES
                    if trial.suggest_categorical(f"vela_disable_{f.lower()}", [False, True])
                ),
                vela_allocator=trial.suggest_categorical("vela_allocator", list(ALLOCATORS)),
            )  # fmt: skip
            if producer == "vela" or "cascader" not in self.producers:
                if "cascader" in self.producers:
                    self._suggest_cascader(trial, units)  # the same space for every trial
                return vela
        return self._suggest_cascader(trial, units)

    def _suggest_cascader(self, trial: optuna.trial.BaseTrial, units: int) -> DesignPoint:
        enabled = (
            trial.suggest_categorical("enable_cascader", [True, False])
            if self.cascader_optional
            else True
        )
        # Every parameter is asked for whether the cascader is on or off, so the space is the
        # same for all trials (samplers and importances need that); a point ignores those of
        # the other kind (the cascader's options when off, buffer_weights when on).
        point = DesignPoint(
            sram_pool_bytes=units * SRAM_ALIGN,
            enable_striping=trial.suggest_categorical("enable_striping", [True, False]),
            enable_multi_dimensional_striping=trial.suggest_categorical(
                "enable_multi_dimensional_striping", [False, True]
            ),
            stripe_factors=trial.suggest_categorical("stripe_factors", list(STRIPE_FACTORS)),
            max_plan_size=trial.suggest_categorical("max_plan_size", list(MAX_PLAN_SIZES)),
            max_proposals=trial.suggest_categorical("max_proposals", list(MAX_PROPOSALS)),
            always_copy_size=trial.suggest_categorical("always_copy_size", list(ALWAYS_COPY_SIZES)),
            # How the cascader ranks its plans changes which schedule a model gets; a graph
            # study is scored with the cascader's own cost, so there it stays the graph's.
            cost_model=(
                trial.suggest_categorical("cost_model", list(COST_MODELS))
                if self.cascader_optional
                else "tvm"
            ),
        )
        if not self.cascader_optional:
            return point
        buffer_weights = trial.suggest_categorical("buffer_weights", [True, False])
        # The layout of narrow feature maps is the network's, so both kinds take it.
        narrow_nhwc = trial.suggest_categorical("narrow_nhwc", [False, True])
        rows = self.row_sum_mean and trial.suggest_categorical("row_sum_mean", [False, True])
        if enabled:
            return replace(point, narrow_nhwc=narrow_nhwc, row_sum_mean=rows)
        return DesignPoint(point.sram_pool_bytes, enable_cascader=False,
                           buffer_weights=buffer_weights, narrow_nhwc=narrow_nhwc,
                           row_sum_mean=rows)  # fmt: skip

    def sram_ladder(self, steps_per_octave: int = 2, low: int | None = None) -> list[int]:
        """Aligned pool sizes spaced evenly in log scale from `low` (default: the space's
        low end) to the high end, both ends included (grid, baseline and seed spine)."""
        low = self.low if low is None else min(max(low, self.low), self.high)
        octaves = math.log2(self.high / low) if self.high > low else 0.0
        count = max(1, math.ceil(octaves * steps_per_octave)) + 1
        sizes = {
            align_down(round(low * 2 ** (octaves * i / (count - 1)))) if count > 1 else low
            for i in range(count)
        }
        return sorted(s for s in sizes if low <= s <= self.high)

    def params_of(self, point: DesignPoint) -> dict:
        """The trial parameters that make the sampler produce `point`."""
        params: dict = {"sram_units": point.sram_pool_bytes // SRAM_ALIGN}
        if len(self.producers) > 1:
            params["producer"] = point.producer
        if "vela" in self.producers:
            params["vela_optimise"] = point.vela_optimise
            params |= {f"vela_disable_{f.lower()}": f in point.vela_disabled for f in FEATURES}
            params["vela_allocator"] = point.vela_allocator
        if "cascader" not in self.producers:
            return params
        params |= point.cascader_options()
        if self.cascader_optional:
            params["enable_cascader"] = point.enable_cascader
            params["buffer_weights"] = point.buffer_weights
            params["narrow_nhwc"] = point.narrow_nhwc
            if self.row_sum_mean:
                params["row_sum_mean"] = point.row_sum_mean
        else:
            del params["cost_model"]
        return params

    def vela_seeds(self) -> list[dict]:
        """Vela's own compiler at every arena size of its dense sweeps within the pool range
        (VELA_LADDER), then with `--optimise Size` at the largest pool; none without it."""
        if "vela" not in self.producers:
            return []
        ladder = [size for size in VELA_LADDER if self.low <= size <= self.high]
        points = [DesignPoint(size, producer="vela") for size in ladder]
        points.append(DesignPoint(self.high, producer="vela", vela_optimise="Size"))
        return [self.params_of(point) for point in points]

    def seed_kinds(self) -> list[DesignPoint]:
        """The option sets seeds cycle through (pool size 0), in order of use: the cascader's
        defaults and the cascader copying every constant it can into SRAM (the fast end of
        a front); for models also no cascader (Vela's own kind of schedule), then the
        Vela-like cost model with its defaults, copying everything and copying nothing, in
        plans of up to the largest plan size (its delay lines and pads let a cascade span a
        residual block and the strided block after it, which takes more than the default
        ten parts on ResNet-50);
        then the smallest schedules (the low end of a front), ranked by each cost model (on
        mobilenet_v1_100_224, U55, the `vela` model's staircase from the same 287.8 KiB floor
        reaches 10.8 M cycles at 318.8 KiB, where the original's takes 37 M), for models the
        `vela` one again with narrow feature maps NHWC (mobilenet_v2_035_96, U55: 34.2 KiB
        where bricks take 38.9 KiB, at about the same cycles); for a model with a mean that
        sums rows first (`row_sum_mean`), the `vela` model's copying nothing and smallest
        schedules and the cascader off with it (DS-CNN, U55: 22.4 KiB where the mean's input
        held whole takes 31.2 KiB; layer by layer 10% faster: its 1 x W and H x 1 kernels
        read fewer weights from flash than one H x W); then copying
        nothing with the original's cost model; last, for models, the cascader off with every
        weight read in place: no SRAM at all where feature maps live off-chip (Dedicated_Sram),
        as Vela's --optimise Size gives there. Copying nothing keeps weights in flash and the
        single-axis schedules small: on mobilenet_v2_100_224 (U55) the Vela-like model's such
        schedules beat Vela's 353.5 KiB points, on vww_mobilenet_v1_025 the original's its
        48 KiB ones."""
        copy_all = ALWAYS_COPY_SIZES[-1]
        if "cascader" not in self.producers:
            return []
        if not self.cascader_optional:
            return [DesignPoint(0), DesignPoint(0, always_copy_size=copy_all), SMALLEST,
                    DesignPoint(0, always_copy_size=0)]  # fmt: skip
        vela = [DesignPoint(0, cost_model="vela", always_copy_size=size,
                            max_plan_size=MAX_PLAN_SIZES[-1])
                for size in (DesignPoint.always_copy_size, copy_all, 0)]  # fmt: skip
        rows = [replace(vela[-1], row_sum_mean=True),
                replace(SMALLEST, cost_model="vela", row_sum_mean=True),
                DesignPoint(0, enable_cascader=False, row_sum_mean=True)]  # fmt: skip
        return [DesignPoint(0), DesignPoint(0, always_copy_size=copy_all),
                DesignPoint(0, enable_cascader=False), *vela, SMALLEST,
                replace(SMALLEST, cost_model="vela"),
                replace(SMALLEST, cost_model="vela", narrow_nhwc=True),
                *(rows if self.row_sum_mean else []),
                DesignPoint(0, always_copy_size=0),
                DesignPoint(0, enable_cascader=False, buffer_weights=False)]  # fmt: skip

    def seed_points(self, count: int, floors: Sequence[int | None] = ()) -> list[dict]:
        """Up to `count` fully fixed trials spread over the pool ladder, neighbours taking
        different seed kinds: a spine across the SRAM range and the main kinds of schedule
        before the sampler takes over (random start-up trials cluster by chance). `floors`:
        the smallest pool each seed kind fits in, where probed (dse.driver.floor_seeds): the
        spine then starts at the smallest of them, and each pick takes the next kind in turn
        whose floor is at or below its pool, so no seed is spent on a pool its kind is known
        not to fit (on a U-Net on U55, five of seven spine seeds were such misfits)."""
        known = [f for f in floors if f is not None]
        ladder = self.sram_ladder(low=min(known) if known else None)
        if count <= 0:
            return []
        if count == 1:
            picks = [ladder[-1]]
        else:
            picks = sorted(
                {ladder[round(i * (len(ladder) - 1) / (count - 1))] for i in range(count)}
            )
        kinds = self.seed_kinds()
        if not kinds:
            return []
        seeds = []
        for i, size in enumerate(picks):
            turn = [(i + k) % len(kinds) for k in range(len(kinds))]
            fitting = [
                j for j in turn if j >= len(floors) or (floors[j] is not None and floors[j] <= size)
            ]
            kind = kinds[(fitting or turn)[0]]
            seeds.append(self.params_of(replace(kind, sram_pool_bytes=size)))
        return seeds

    def grid_points(self) -> list[dict]:
        """A small exhaustive grid: the striping switches x the pool ladder, other options at
        their defaults, for models the ladder without the cascader too, and Vela's compiler
        with its defaults. Pools vary fastest, so a study cut short still spans the SRAM
        range."""
        kinds = []
        if "cascader" in self.producers:
            kinds = [
                DesignPoint(0, enable_striping=striping, enable_multi_dimensional_striping=multi)
                for striping in (True, False)
                for multi in (False, True)
            ]
            if self.cascader_optional:
                kinds.append(DesignPoint(0, enable_cascader=False))
        if "vela" in self.producers:
            kinds.append(DesignPoint(0, producer="vela"))
        return [
            self.params_of(replace(kind, sram_pool_bytes=size))
            for kind in kinds
            for size in self.sram_ladder()
        ]
