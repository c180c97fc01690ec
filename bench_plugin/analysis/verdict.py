"""Verdict: is sharing worth it, at which loads, and under which conditions (the seed's rule).

Per stage, against the control at the same offered load:

- "worth it": goodput per device is significantly higher than the control's AND every class keeps its
  P95 SLO (and the llm TTFT/TPOT SLOs) AND its error rate stays within budget, in every repeat;
- "trade-off": goodput per device is significantly higher, but some class breaks an SLO or its budget;
- "loss": goodput per device is not higher, shown by at least two paired repeats: lower, or no
  significant difference (which is a result: it rules out a path not worth its complexity), or no
  request of the arm met every SLO in some repeat (its goodput per device ratio is 0);
- "inconclusive (n repeats)": fewer than two paired repeats measured goodput per device at this stage.
  One repeat has no spread, so it can show neither a rise nor its absence: it is never a loss;
- "not compared": the arm or the control has no measurement to pair at this stage;
- "not measured": in some run of the arm or the control at this stage, every request of a class failed
  with one and the same error that load does not cause (a reply it cannot read, a 4xx for the body it
  sends: ClassStats.sole_error). That measured the protocol, not the GPU: the call names the error;
- "generator-limited": the load generator fell behind in some run of the arm or the control at this
  stage (analysis/selfcheck.py), so its latency is partly the client's: nothing is concluded about the
  GPU there. The figures stay in the summary; the fix depends on the kind (selfcheck.advice): more
  load-generating processes for a CPU-bound one, moving the blocking operation off the loop for a stalled one.

Overall, stages are read in load order: the arm is "worth it up to stage k" when every stage up to k is
worth it, and the sentence says what happens above, with the numbers that decided it and the
conditions (devices, driver, sharing mode, load range, repeats) under which it holds. The arm's call
is the first of worth it, trade-off and loss that some stage has; else inconclusive when some stage is;
else not compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench_plugin.analysis.boundary import format_offered
from bench_plugin.analysis.selfcheck import advice
from bench_plugin.analysis.significance import describe
from bench_plugin.results.reasons import Reason, reason
from bench_plugin.results.summary import Boundary, Conditions, StageComparison, Verdict
from bench_plugin.results.words import Call, Significance

MIN_PAIRS = 2
"""Paired repeats needed before a stage can be called anything but inconclusive."""

CONTROLS = " the control's"
KEPT = "every class kept its SLOs and error budget in every repeat"

_ARTICLE: dict[str, str] = {
    Call.WORTH_IT: "worth it", Call.TRADE_OFF: "a trade-off", Call.LOSS: "a loss", Call.NOT_COMPARED: "not compared",
    Call.GENERATOR_LIMITED: "not judged (load generator limited)",
    Call.NOT_MEASURED: "not measured (every request of a class failed with one protocol error)"}


def inconclusive(pairs: int) -> str:
    """The inconclusive call for this many paired repeats: ``inconclusive (1 repeat)``."""
    return f"{Call.INCONCLUSIVE} ({pairs} repeat{'s' if pairs != 1 else ''})"


def is_inconclusive(call: str | None) -> bool:
    """Whether ``call`` is an inconclusive call, whatever its count of repeats."""
    return call is not None and call.startswith(Call.INCONCLUSIVE)


def too_few(pairs: int) -> str:
    """Why fewer than MIN_PAIRS paired repeats decide nothing, and what to do about it."""
    one = "1 paired repeat has" if pairs == 1 else f"{pairs} paired repeats have"
    return (f"{one} no spread, so it shows neither a rise nor its absence: run at least {MIN_PAIRS} repeats "
            "(3 or more for a useful interval)")


@dataclass(frozen=True)
class StageVerdict:
    """The call at one stage and the figures that decided it."""

    call: str
    reasons: tuple[Reason, ...]
    pairs: int = 0
    """Paired repeats with a goodput per device ratio (a zero ratio counts; a missing one does not)."""


def stage_verdict(stage: StageComparison) -> StageVerdict:
    """The seed's rule at one stage of a non-control arm."""
    breaches = tuple(b for c in stage.classes.values() for b in c.breaches)
    ratio = stage.goodput_per_device_ratio
    # A zero ratio is left out of the geometric mean, but it was measured: the arm met no SLO there.
    zeros = sum(1 for v in ratio.spread.excluded if v is not None) if ratio else 0
    pairs = len(ratio.spread.values) + zeros if ratio else 0
    if stage.protocol_failure:
        fix = ("the server does not accept or return what the class sends and reads: fix the scenario or the "
               "server, then rerun")
        return StageVerdict(Call.NOT_MEASURED, _why(*map(str, stage.protocol_failure), fix), pairs)
    if stage.generator_limited:
        why = reason("the load generator fell behind, so latency here is partly the client's",
                     [str(flag) for flag in stage.generator_limited])
        return StageVerdict(Call.GENERATOR_LIMITED, _why(why, advice(stage.generator_checks)), pairs)
    if ratio is None or pairs == 0:
        return StageVerdict(Call.NOT_COMPARED, _why(_not_compared(stage), *breaches))
    own, ref = stage.goodput_per_device.mean, (stage.control_goodput_per_device or stage.goodput_per_device).mean
    figures = f"{own:.3g} vs {ref:.3g} req/s within SLO, " if own is not None and ref is not None else ""
    gain = f"goodput per device {figures}{describe(ratio, what=CONTROLS)}"
    kept = all(c.meets_slo and c.within_error_budget for c in stage.classes.values())
    slo = (KEPT,) if kept else breaches
    if pairs < MIN_PAIRS:
        return StageVerdict(inconclusive(pairs), _why(gain, *slo, too_few(pairs)), pairs)
    if zeros:
        none = f"no request of this arm met every SLO in {zeros} of {pairs} paired repeats (goodput per device 0)"
        return StageVerdict(Call.LOSS, _why(gain, none, *breaches), pairs)
    if ratio.call != Significance.HIGHER:
        return StageVerdict(Call.LOSS, _why(gain, *breaches), pairs)
    if kept:
        return StageVerdict(Call.WORTH_IT, _why(gain, KEPT), pairs)
    return StageVerdict(Call.TRADE_OFF, _why(gain, *breaches), pairs)


def _why(*parts: str | Reason) -> tuple[Reason, ...]:
    """A verdict's reasons as the document holds them: each sentence a Reason (results/reasons.py)."""
    return tuple(p if isinstance(p, Reason) else reason(p) for p in parts)


def _not_compared(stage: StageComparison) -> str:
    """Why a stage has no goodput-per-device ratio."""
    if stage.paired_repeats == 0:
        return "no repeat of this arm and of the control both measured this stage"
    if stage.control_goodput_per_device is None or stage.control_goodput_per_device.mean is None:
        return "the control has no complete measurement at this stage (a class was skipped after a rollback)"
    return "this arm has no complete measurement at this stage (a class was skipped after a rollback)"


def describe_conditions(c: Conditions) -> str:
    """One sentence for the verdict: where it was measured, and that elsewhere it may differ."""
    loads = ", ".join(f"{name} {lo:.3g}-{hi:.3g} {'users' if c.arrival.get(name) == 'closed' else 'req/s'}"
                      for name, (lo, hi) in c.load_range.items())
    driver = f", driver {c.driver}" if c.driver else ""
    against = f" against {c.control_sharing}" if c.control_sharing else ""
    repeats = f"{c.repeats} repeat{'s' if c.repeats != 1 else ''}"
    backend = f" ({c.backend} backend)" if c.backend else ""
    return (f"Measured on {', '.join(c.devices) or 'unnamed devices'}{driver}{backend}, "
            f"sharing {c.sharing}{against}, loads {loads}, {repeats}; another device "
            "model, driver or load range may give a different result.")


def _runs(stages: list[tuple[StageComparison, StageVerdict]]) -> list[list[tuple[StageComparison, StageVerdict]]]:
    """Consecutive stages with the same call."""
    out: list[list[tuple[StageComparison, StageVerdict]]] = []
    for item in stages:
        if out and out[-1][-1][1].call == item[1].call:
            out[-1].append(item)
        else:
            out.append([item])
    return out


def _span(run: list[tuple[StageComparison, StageVerdict]], first: bool, arrival: dict[str, str] | None) -> str:
    lo, hi = run[0][0], run[-1][0]
    call = run[0][1].call
    where = f"at stage {lo.index}" if lo is hi else f"at stages {lo.index}-{hi.index}"
    if first and call == Call.WORTH_IT:
        where = f"up to stage {hi.index}"
    # Where it is worth it, the highest load decides; elsewhere the first stage where the call changed.
    decisive = hi if call == Call.WORTH_IT else lo
    reasons = run[-1][1].reasons if call == Call.WORTH_IT else run[0][1].reasons
    load = format_offered(decisive.offered, arrival)
    return f"{_ARTICLE.get(call, call)}{'' if first else ' above,'} {where} ({load}): {'; '.join(map(str, reasons))}"


def overall_verdict(arm: str, control: str, stages: list[tuple[StageComparison, StageVerdict]],
                    boundary: Boundary, conditions: Conditions) -> Verdict:
    """The arm's verdict from its per-stage verdicts, ``stages`` in load order (loads in the units of
    ``conditions.arrival``: users for a closed-loop class)."""
    calls = [v.call for _, v in stages]
    up_to = None
    for stage, v in stages:
        if v.call != Call.WORTH_IT:
            break
        up_to = stage.index
    call: str | None = next((c for c in (Call.WORTH_IT, Call.TRADE_OFF, Call.LOSS) if c in calls), None)
    if call is None:
        unsure = [v.pairs for _, v in stages if is_inconclusive(v.call)]
        call = (inconclusive(max(unsure)) if unsure else Call.NOT_MEASURED if Call.NOT_MEASURED in calls
                else Call.NOT_COMPARED)
    parts = [_span(run, i == 0, conditions.arrival) for i, run in enumerate(_runs(stages))]
    text = f"{arm} against {control}: " + ("; ".join(parts) if parts else "no stage was measured") + "."
    text += f" Operating boundary: {boundary.text[:1].lower()}{boundary.text[1:]} {describe_conditions(conditions)}"
    return Verdict(call=call, text=text, worth_it_up_to_stage=up_to, conditions=conditions)
