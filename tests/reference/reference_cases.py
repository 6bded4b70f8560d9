"""Builder cases built and legalized once per session, shared by the reference tests."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from cascader.testing.networks import CATALOGUE
from cascader.verify.model_reference import ModelReference


@dataclass(frozen=True)
class LegalizedCase:
    model: bytes
    reference: ModelReference


@functools.cache
def legalized_case(case: str) -> LegalizedCase:
    model = CATALOGUE[case]().build()
    return LegalizedCase(model, ModelReference.from_model(model, case))
