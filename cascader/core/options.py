"""CascaderOptions: the knobs of one cascader run, with the original backend's defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

COST_MODELS = ("tvm", "vela")
# The values each whole-number option may take: beyond these a search never ends (stripe
# factors) or a count means nothing more.
OPTION_RANGES: dict[str, tuple[int, int]] = {
    "stripe_factors": (1, 64),
    "max_plan_size": (1, 1 << 16),
    "max_proposals": (1, 1 << 16),
    "max_open_plans": (1, 1 << 16),
    "max_closed_plans": (1, 1 << 16),
    "always_copy_size": (0, 1 << 32),
}


@dataclass(frozen=True)
class CascaderOptions:
    """Options of one cascader run. `cascade_region` names the MemoryRegion the cascade (and
    every interior buffer) lives in; `cost_model` picks how plans are costed: "tvm" is the
    original cascader's model (bit-exact with TVM v0.18), "vela" follows Vela's performance
    model (see cascader.core.plan_context); the other fields bound the search.
    `disable_block_culling` is the original's option, kept (with its default) so option sets
    and exported configs carry the original's fields; as in TVM v0.18, the cascader never
    reads it: whether block configs are culled is the device's choice (TVM's device config,
    here `EthosuDevice.block_configs`), and the flow's graphs use the culled lists."""

    cascade_region: str = "SRAM"
    max_proposals: int = 64
    stripe_factors: int = 5
    max_plan_size: int = 10
    max_open_plans: int = 8
    max_closed_plans: int = 32
    always_copy_size: int = 1024
    enable_striping: bool = False
    enable_multi_dimensional_striping: bool = False
    disable_pareto_plans: bool = False
    disable_pareto_proposals: bool = False
    disable_block_culling: bool = True
    cost_model: str = "tvm"

    def __post_init__(self) -> None:
        if self.cost_model not in COST_MODELS:
            raise ValueError(
                f"cost_model = {self.cost_model!r}, but must be one of {', '.join(COST_MODELS)}"
            )
        for name, (low, high) in OPTION_RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ValueError(f"{name} = {value}, but must be {low} to {high}")

    def to_json(self) -> dict:
        data = asdict(self)
        for name, value in data.items():
            if isinstance(value, bool):
                data[name] = int(value)
        return data

    @classmethod
    def field_types(cls) -> dict[str, type]:
        """Name -> Python type of every option, for parsing `k=v` overrides."""
        return {f.name: {"str": str, "int": int, "bool": bool}[str(f.type)] for f in fields(cls)}

    @classmethod
    def from_json(cls, data: dict) -> CascaderOptions:
        """Options from a JSON object; missing keys keep their defaults. Unknown keys are
        rejected by the caller (graph_json), which knows the field path to report."""
        types = cls.field_types()
        return cls(**{k: types[k](v) for k, v in data.items() if k in types})
