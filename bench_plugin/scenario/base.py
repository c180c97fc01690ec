"""The base of every scenario model: strict models, the error a bad scenario raises, shared field types."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PositiveFloat = Annotated[float, Field(gt=0)]


class ScenarioError(Exception):
    """A scenario that cannot be run; the message names the file, the key and the value."""


class StrictModel(BaseModel):
    """Base for every scenario model: unknown keys are errors, values are never coerced silently.

    A number must be finite: YAML's ``.inf`` and ``.nan`` are refused as a rate, a duration, an SLO.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, allow_inf_nan=False)
