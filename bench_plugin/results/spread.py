"""The figure over repeats: summary.json's base model, its ``Spread`` (a mean, its 95% interval, the values), and a
series' ``MeanPeak`` over a stage.

Every section of summary.json (results/summary/, results/server_figures.py) is a ``Model``; every figure over
repeats is a ``Spread``, and every paired arm-against-control figure a ``Judged`` (analysis/statistics.py and
analysis/significance.py make them).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

Kind = Literal["value", "difference", "ratio", "complement"]


class Model(BaseModel):
    """Base of every section: unknown keys are refused, values are not coerced across types."""

    model_config = ConfigDict(extra="forbid", frozen=False)


class Spread(Model):
    """A figure over repeats: its mean, 95% interval and per-repeat values, and which kind of figure it is.

    ``value`` and ``difference``: arithmetic mean, ``ci95`` the Student-t half-width, [lo, hi] = mean ± ci95.
    ``ratio``: geometric mean, ``ci95`` None, [lo, hi] the log-scale interval. ``complement``: 1 - a ratio.
    """

    kind: Kind = "value"
    mean: float | None
    ci95: float | None
    lo: float | None = None
    hi: float | None = None
    values: list[float]
    note: str | None = None
    """Why some per-repeat values were left out (ratios only), or None."""
    excluded: tuple[float | None, ...] = Field(default=(), exclude=True)
    """The per-repeat inputs left out (None where missing): for the analysis, not written."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n(self) -> int:
        """How many per-repeat values the figure is over (written for readers; read back as a check)."""
        return len(self.values)

    @model_validator(mode="before")
    @classmethod
    def _written_n(cls, data: Any) -> Any:
        if isinstance(data, dict) and "n" in data:
            data = dict(data)
            n = data.pop("n")
            if n != len(data.get("values") or []):
                raise ValueError(f"n is {n} but there are {len(data.get('values') or [])} values")
        return data


class Judged(Spread):
    """A paired arm-vs-control figure: its spread and whether it differs from "no change"."""

    no_change: float
    """The value meaning "same as the control" (1 for ratios, 0 for differences)."""
    significant: bool
    call: str
    """``higher``, ``lower`` or ``no significant difference``."""
    reason: str | None = None
    """Why no call could be made (one repeat, no pairs), or None; ``note`` says why values were left out."""

    @property
    def spread(self) -> Spread:
        """The figure as a plain spread."""
        return Spread(kind=self.kind, mean=self.mean, ci95=self.ci95, lo=self.lo, hi=self.hi, values=self.values,
                      note=self.note, excluded=self.excluded)

    @property
    def notes(self) -> str | None:
        """Why no call could be made and why values were left out, in one text (None when neither)."""
        return "; ".join(n for n in (self.reason, self.note) if n) or None


class MeanPeak(Model):
    """The mean and the peak of a series over a stage, and how many polls it rests on."""

    mean: float
    peak: float
    points: int
