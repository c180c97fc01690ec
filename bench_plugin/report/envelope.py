"""The envelope in the report: each arm's boundary along every ray, its model, and its frontier in 2-D slices.

One table per arm: per ray, the boundary load per class with the scale's 95% CI over repeats, the
highest load that passed, whether the hold confirmed it, what breaks first, and what the model predicts
(held-out rays marked, with the prediction's error). Then the model: its form, each class's cost and
busy limit, its fit error and where it may be used. The picture draws the frontier on each face of the
load space where two classes run and the third idles: each arm's measured boundaries with their CIs
along the ray, and its model's frontier as a line, the control's beside the others'.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

from bench_plugin.analysis.envelope_model import predicted_scale
from bench_plugin.report.figures import ArmStyle, DataMarks, Layout, Plot, figure_svg, grid, new_figure, style
from bench_plugin.report.page import Block, Figure, Heading, Item, Paragraph, Section, bullets, table
from bench_plugin.results.limits import limits_text
from bench_plugin.results.summary import Envelope, EnvelopeFit, EnvelopeRay, Summary
from bench_plugin.results.words import Hold, SearchStatus


def envelopes(summary: Summary) -> list[tuple[str, Envelope]]:
    """(arm, its envelope) for every arm that searched rays, in the summary's order."""
    comparison = summary.comparison
    if comparison is None:
        return []
    return [(name, arm.envelope) for name, arm in comparison.arms.items() if arm.envelope and arm.envelope.rays]


def _mix(mix: dict[str, float]) -> str:
    return " : ".join(f"{name} {rate:g}" for name, rate in mix.items())


def _boundary(ray: EnvelopeRay) -> str:
    if not ray.boundary:
        return "-"
    return ", ".join(f"{name} {load:.3g}" for name, load in ray.boundary.items()) + " req/s"


def _scale(ray: EnvelopeRay) -> str:
    """The scale with its CI, and the search's status where it found no boundary (``generator-limited``: the load
    generator fell behind first)."""
    s = ray.scale
    status = "" if ray.agreed == SearchStatus.FOUND else f" ({', '.join(ray.status)})"
    if s.mean is None:
        return "-" + status
    return (f"{s.mean:.3g} ± {s.ci95:.2g}" if s.ci95 is not None else f"{s.mean:.3g} ({_one_repeat(ray)})") + status


def _one_repeat(ray: EnvelopeRay) -> str:
    """``one repeat: held at 1.25, broke at 1.5``: with no spread, the bracket the search left is the uncertainty."""
    only = ray.per_repeat[0] if len(ray.per_repeat) == 1 else None
    if only is None or only.lo is None or only.hi is None or ray.agreed != SearchStatus.FOUND:
        return "one repeat"
    return f"one repeat: held at {only.lo:.3g}, broke at {only.hi:.3g}"


def _held(ray: EnvelopeRay) -> str:
    held = [r.sustain for r in ray.per_repeat]
    if not any(held):
        return "-"
    confirmed, failed = sum(h == Hold.CONFIRMED for h in held), sum(h == Hold.FAILED for h in held)
    return f"{confirmed} of {len(held)} confirmed" + (f", {failed} failed" if failed else "")


def _predicted(ray: EnvelopeRay, fit: EnvelopeFit | None) -> str:
    if fit is None:
        return "-"
    value = fit.rays.get(ray.name)
    if value is None:
        return "-"
    error = fit.held_out_error.get(ray.name) if ray.held_out else None
    measured = ray.scale.mean
    if error is None and measured and ray.agreed == SearchStatus.FOUND:  # beyond the maximum, nothing to compare with
        error = (value - measured) / measured
    return f"{value:.3g}" + ("" if error is None else f" ({error:+.0%})")


HEADERS = ["ray", "mix (req/s at scale 1)", "boundary", "scale (95% CI)", "highest pass", "hold", "breaks first",
           "model (error)"]


def rows(envelope: Envelope) -> list[list[str]]:
    """The arm's table rows, one per ray."""
    out = []
    for ray in envelope.rays:
        out.append([ray.name + (" (held out)" if ray.held_out else ""), _mix(ray.mix), _boundary(ray), _scale(ray),
                    "-" if ray.lo.mean is None else f"{ray.lo.mean:.3g}", _held(ray), limits_text(ray.limit) or "-",
                    _predicted(ray, envelope.model)])
    return out


def model_text(fit: EnvelopeFit) -> str:
    """The model in plain words with its fit."""
    shared = "; ".join(" + ".join(d) for d in fit.devices)
    error = "-" if fit.fit_error is None else f"{fit.fit_error:.0%}"
    return (f"Model: {fit.form}; devices: {shared}. Fit on {fit.points} probe measurements, RMS relative error "
            f"{error}. Valid for {fit.validated}.")


MODEL_HEADERS = ["criterion", "SLO", "a (ms)", "b (ms)", "w per req/s (llm / embedding / asr, per mille)",
                 "U (busy at its SLO)", "busiest measured", "points", "fit error"]


def model_rows(fit: EnvelopeFit) -> list[list[str]]:
    """One row per criterion: its law, its interference row and its limit."""
    out = []
    for name, row in fit.criteria.items():
        weights = " / ".join("-" if c not in row.weights else f"{row.weights[c] * 1000:.3g}"
                             for c in ("llm", "embedding", "asr"))
        out.append([name, f"{row.slo_ms:g} ms", f"{row.a:.0f}", f"{row.b:.0f}", weights, f"{row.limit:.2f}",
                    f"{row.measured:.2f}", str(row.points),
                    "-" if row.fit_error is None else f"{row.fit_error:.0%}"])
    return out


def section(summary: Summary, plot: Plot | None = None) -> Section | None:
    """The "Operating envelope" section (None without an envelope): its picture (``plot``, where drawn), then per
    arm its rays and its model."""
    found = envelopes(summary)
    if not found:
        return None
    blocks: list[Block] = [Figure.of(plot, titled=False)] if plot is not None else []
    for name, envelope in found:
        blocks += [Heading(name), table(HEADERS, rows(envelope))]
        if envelope.model is None:
            blocks.append(Paragraph(("No model: too few probes measured to fit one.",)))
            continue
        blocks += [Paragraph((model_text(envelope.model),)), table(MODEL_HEADERS, model_rows(envelope.model))]
    return Section("envelope", "Operating envelope", tuple(blocks))


def terminal(summary: Summary) -> list[Item]:
    """The terminal answer's envelope: per arm, each ray's boundary, and the model's held-out error."""
    out = []
    for name, envelope in envelopes(summary):
        rays = [f"{ray.name}{' (held out)' if ray.held_out else ''}: {_boundary(ray)}, scale {_scale(ray)}; "
                f"breaks first: {limits_text(ray.limit) or '-'}; model {_predicted(ray, envelope.model)}"
                for ray in envelope.rays]
        if envelope.model is not None:
            rays.append(f"model valid for {envelope.model.validated}")
        out.append(Item((f"{name} envelope:",), bullets(rays)))
    return out


def _faces(summary: Summary) -> list[tuple[str, str]]:
    names = [n for n in (summary.classes or []) if any(n in r.mix for _, e in envelopes(summary) for r in e.rays)]
    return list(combinations(names, 2))


def modelled(fit: EnvelopeFit) -> set[str]:
    """The classes the model has a criterion of: where one has none (its rays did not end, or its load
    generator fell behind first), the model knows nothing of what that class's own SLO allows."""
    return {row.workload for row in fit.criteria.values()}


FRONTIER_MARGIN = 1.3
"""A face's axes reach this far beyond the farthest load measured on it (a ray's boundary or its CI's end)."""


def envelope_plot(summary: Summary, styles: dict[str, ArmStyle]) -> Plot | None:
    """The frontier on every face of two classes (the third idle), per arm; None without rays on any face.

    A model's frontier is drawn on a face only where the model has a criterion of both its classes (else the
    face says which class it does not know), and each face's axes are scaled to the loads measured on it, so
    an extrapolated frontier cannot squeeze the measured points against zero.
    """
    found = envelopes(summary)
    faces = _faces(summary)
    if not found or not faces:
        return None
    marks = DataMarks("envelope")
    unknown: list[str] = []
    with style():
        fig = new_figure(3.2)
        axes = grid(fig, 1, len(faces), Layout(left=0.7, right=0.2, top=0.35, bottom=0.55, wgap=0.75))
        for ax, (x, y) in zip(axes, faces, strict=True):
            reach = [0.0, 0.0]  # the farthest load measured on the face, per axis
            curves: list[tuple[str, str, list[tuple[float, float]]]] = []
            for name, envelope in found:
                st = styles.get(name)
                colour = st.colour if st else "#222222"
                # a boundary, or a load shown to hold
                on_face = [r for r in envelope.rays if set(r.mix) <= {x, y} and r.scale.mean is not None
                           and r.agreed in (SearchStatus.FOUND, SearchStatus.ABOVE_MAXIMUM)]
                for ray in on_face:
                    assert ray.scale.mean is not None
                    lo = ray.scale.lo if ray.scale.lo is not None else ray.scale.mean
                    hi = ray.scale.hi if ray.scale.hi is not None else ray.scale.mean
                    xs = [ray.mix.get(x, 0.0) * s for s in (lo, hi)]
                    ys = [ray.mix.get(y, 0.0) * s for s in (lo, hi)]
                    reach = [max(reach[0], *xs), max(reach[1], *ys)]
                    marks.tag(ax.plot(xs, ys, color=colour, linewidth=2.2, alpha=0.6, clip_on=False))
                    marks.tag(ax.plot([ray.mix.get(x, 0.0) * ray.scale.mean], [ray.mix.get(y, 0.0) * ray.scale.mean],
                                      st.marker if st else "o", color=colour, markersize=6,
                                      markerfacecolor="white" if ray.held_out else colour,
                                      clip_on=False))  # a ray of one class ends on an axis: the whole marker
                if envelope.model is None:
                    continue
                missing = sorted({x, y} - modelled(envelope.model))
                if missing:
                    unknown.append(f"{name}: {', '.join(missing)} (face {x} and {y})")
                    continue
                angles = np.linspace(0.0, math.pi / 2, 181)
                curve = [(math.cos(a), math.sin(a), predicted_scale(envelope.model, {x: math.cos(a), y: math.sin(a)}))
                         for a in angles]
                points = [(cx * s, cy * s) for cx, cy, s in curve if s is not None]
                if points:
                    curves.append((name, colour, points))
            for name, colour, points in curves:
                marks.tag(ax.plot([p[0] for p in points], [p[1] for p in points], color=colour,
                                  linewidth=1.0, linestyle="--", label=name))
            ax.set_xlabel(f"{x} req/s")
            ax.set_ylabel(f"{y} req/s")
            if reach[0] > 0 and reach[1] > 0:
                ax.set_xlim(0, reach[0] * FRONTIER_MARGIN)
                ax.set_ylim(0, reach[1] * FRONTIER_MARGIN)
            else:  # nothing measured along one axis: the frontiers drawn say how far it goes
                ax.set_xlim(left=0)
                ax.set_ylim(bottom=0)
            ax.set_title(f"{x} and {y} (others idle)", fontsize=9)
        handles = [h for h in axes[0].get_legend_handles_labels()[0]]
        if handles:
            axes[-1].legend(loc="best", fontsize=8)  # clear of the frontiers, whatever their shape
        svg = figure_svg(fig, "envelope")
    caption = ("Each arm's operating envelope on each face where two classes run and the third idles. Markers: the "
               "boundary measured along each ray (mean over repeats; hollow: a held-out ray), with its 95% CI as a "
               "thick segment along the ray. Dashed: the envelope model's frontier. Loads inside a frontier keep "
               "every SLO; further out is more load on one device. The control (black) runs each class on its own "
               "device. The axes reach a little beyond the loads measured.")
    if unknown:
        caption += (" No frontier is drawn where the model has no criterion of a class (none of its rays ended, "
                    "or its load generator fell behind first): " + "; ".join(unknown) + ".")
    return Plot("envelope-picture", "Operating envelope per arm", svg, caption)
