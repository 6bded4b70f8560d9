"""One trial of a model study rebuilt into its schedule, to show where its SRAM goes: the
memory timeline and the cascade map, with layers named as in the model."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from optuna.trial import FrozenTrial

from cascader.pipeline import Session
from dse.cascade_map import Cascade, cascade_map
from dse.space import DesignPoint
from dse.study import StudySettings
from dse.timeline import Timeline, memory_timeline

__all__ = ["PointView", "point_view"]


@dataclass(frozen=True)
class PointView:
    """A trial's schedule seen two ways, and the SRAM its trial recorded."""

    trial: FrozenTrial
    timeline: Timeline
    cascades: list[Cascade]
    sram_used_bytes: int


def point_view(settings: StudySettings, trial: FrozenTrial, session: Session) -> PointView:
    """Schedule the trial's point again (deterministic: the same schedule it was scored
    with) in `session`, the study's model on its device (`dse.evaluators.model_session`)."""
    config = DesignPoint(**trial.user_attrs["config"]).config(settings.sram_max)
    with contextlib.redirect_stdout(io.StringIO()):  # Vela's allocator prints warnings
        schedule = session.schedule(config).schedule
    ops, origins = session.prepared_for(config).network.ops, session.prepared.origins

    def layer(part: int) -> tuple[str, str]:
        """The part's layer: the model's name for it and its operator (type and index)."""
        origin = origins.get(ops[part].name)
        if origin is None:
            return ops[part].name, ops[part].op_family
        return origin.tensor, f"{origin.op} #{origin.index}"

    return PointView(
        trial,
        memory_timeline(schedule, lambda part: layer(part)[0]),
        cascade_map(schedule, layer),
        int(trial.user_attrs["metrics"]["sram_used_bytes"]),
    )
