"""Single-part plans: one per (output stripe config, input config choice, output config) of
a part, costed by the plan context's cost model over all combinations of input choices at
once (arrays), Plan objects built only for the plans kept. Each cost model's plans have a
module of their own (`single_plans_tvm`, `single_plans_vela`)."""

from __future__ import annotations

from collections.abc import Callable

from cascader.core.part import Part
from cascader.core.plan_context import PlanContext
from cascader.core.single_plan_arrays import SinglePlans
from cascader.core.single_plans_tvm import tvm_single_plans
from cascader.core.single_plans_vela import vela_single_plans
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor_config import TensorConfig

__all__ = ["SinglePlans", "generate_single_plans"]


def generate_single_plans(
    part: Part,
    output_stripe_configs: list[StripeConfig],
    ctx: PlanContext,
    joinable: Callable[[TensorConfig], bool] | None = None,
) -> SinglePlans:
    """One plan per (output stripe config, input config choice, output config) for `part`.
    With `joinable`, plans with an INTERIOR output config it rejects are not built (they
    could never merge into a consumer plan, so graph plan generation would drop them).
    Costs are computed per input config choice, then summed for every combination of
    choices at once."""
    if ctx.options.cost_model == "vela":
        return vela_single_plans(part, output_stripe_configs, ctx, joinable)
    return tvm_single_plans(part, output_stripe_configs, ctx, joinable)
