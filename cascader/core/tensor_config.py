"""TensorConfig: where a tensor lives during a plan, how it is buffered, and its buffer size."""

from __future__ import annotations

import math
from enum import IntEnum

from cascader.core.part import BufferMode
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor import Tensor


class TensorConfigState(IntEnum):
    """BOUNDARY configs are a plan's inputs/outputs (whole tensors in their home region);
    INTERIOR configs are intermediate stripes inside a cascade."""

    BOUNDARY = 0
    INTERIOR = 1


class TensorConfig:
    """A tensor's home region, state, buffer mode, stripe configs and optional copy into
    another region. Built only through TensorConfigTable, which makes equal configs one
    object, so equality and hashing are by identity: dictionaries and tuples of configs in
    the plan and proposal bookkeeping then hash in C, not through a Python `__hash__`."""

    __slots__ = (
        "buffer_mode",
        "buffer_size",
        "copy_region",
        "copy_tensor",
        "home_region",
        "id",
        "state",
        "stripe_configs",
        "tensor",
    )

    def __init__(
        self,
        tensor: Tensor,
        home_region: str,
        state: TensorConfigState,
        buffer_mode: BufferMode,
        stripe_configs: tuple[StripeConfig, ...],
        copy_tensor: bool,
        copy_region: str,
        id: int = -1,
        buffer_size: int | None = None,
    ) -> None:
        self.tensor = tensor
        self.home_region = home_region
        self.state = state
        self.buffer_mode = buffer_mode
        self.stripe_configs = tuple(stripe_configs)
        self.copy_tensor = copy_tensor
        self.copy_region = copy_region
        self.id = id
        self.buffer_size = self._buffer_size() if buffer_size is None else buffer_size

    def __repr__(self) -> str:
        return (
            f"TensorConfig(tensor={self.tensor.id}, home={self.home_region}, "
            f"state={self.state.name}, mode={self.buffer_mode.name}, "
            f"shapes={[s.shape for s in self.stripe_configs]}, copy={self.copy_tensor})"
        )

    def _buffer_size(self) -> int:
        """RECOMPUTE holds one stripe; ROLLING holds the full tensor except along the rolling
        axis (the outermost striped, ordered axis; axis 0 if none), where it holds a stripe."""
        tensor = self.tensor
        if self.buffer_mode == BufferMode.RECOMPUTE:
            return tensor.scaled_bytes(sum(math.prod(s.shape) for s in self.stripe_configs))
        total = 0
        for config in self.stripe_configs:
            rolling_axis = -1
            for axis, (order, stripes) in enumerate(zip(config.order, config.stripes, strict=True)):
                if (
                    stripes > 1
                    and order != 0
                    and (rolling_axis == -1 or order < config.order[rolling_axis])
                ):
                    rolling_axis = axis
            rolling_axis = max(rolling_axis, 0)
            size = 1
            for axis, extent in enumerate(tensor.shape):
                if axis == rolling_axis:
                    size *= config.shape[axis] if axis < len(config.shape) else 0
                else:
                    size *= extent
            total += size
        return tensor.scaled_bytes(total)

    def to_json(self) -> dict:
        return {
            "tensor": self.tensor.id,
            "home_region": self.home_region,
            "state": int(self.state),
            "buffer_mode": int(self.buffer_mode),
            "stripe_shapes": [list(s.shape) for s in self.stripe_configs],
            "copy_tensor": bool(self.copy_tensor),
            "copy_region": self.copy_region,
        }


class TensorConfigTable:
    """Interns TensorConfigs: one object (with a stable small id) per distinct value."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, TensorConfig] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def find(self, value: tuple) -> TensorConfig | None:
        """The config of `value` (`get`'s arguments, in order) if one was made, without making
        one."""
        tensor, *rest = value
        return self._by_key.get((tensor.id, *rest))

    def get(
        self,
        tensor: Tensor,
        home_region: str,
        state: TensorConfigState,
        buffer_mode: BufferMode,
        stripe_configs: tuple[StripeConfig, ...],
        copy_tensor: bool,
        copy_region: str,
    ) -> TensorConfig:
        # The enums key as the integers they equal (same hash, equal), without converting.
        key = (tensor.id, home_region, state, buffer_mode, stripe_configs, copy_tensor, copy_region)
        config = self._by_key.get(key)
        if config is None:
            # The configs of one tensor striped one way differ mostly in home and state,
            # which the buffer size ignores (sizes are kept with the tensor, see Tensor).
            sized = (buffer_mode, stripe_configs)
            config = TensorConfig(
                tensor,
                home_region,
                state,
                buffer_mode,
                stripe_configs,
                copy_tensor,
                copy_region,
                id=len(self._by_key),
                buffer_size=tensor.buffer_sizes.get(sized),
            )
            tensor.buffer_sizes[sized] = config.buffer_size
            self._by_key[key] = config
        return config
