"""What each arm's servers made of the LLM requests, for the reports' conditions: one line per arm.

Whether the output lengths were the request set's (the server honoured ignore_eos/min_tokens: every
arm generated the same tokens) or set by the model (bench_plugin.run.readiness: the server rejects or
ignores them, or the scenario asks for none), and where the token counts came from (the server's
``usage``, or one token per chunk). Lengths set by the model can differ between arms: their TPOT and
throughput then compare unequal work.
"""

from __future__ import annotations

from collections import Counter

from bench_plugin.results.summary import Summary

LENGTHS = {"exact": "exact (the request set's)", "model": "set by the model"}


def output_length_lines(summary: Summary) -> list[str]:
    """``arm A, llm output lengths: ...; token counts from ...`` for each arm whose LLM stages say."""
    lines = []
    arms = dict.fromkeys(t.arm for t in summary.trials)
    for arm in arms:
        lengths: Counter[str] = Counter()
        sources: Counter[str] = Counter()
        for trial in (t for t in summary.trials if t.arm == arm):
            for stage in trial.stages:
                llm = stage.classes.get("llm")
                if llm is None:
                    continue
                if llm.output_lengths:
                    lengths[llm.output_lengths] += 1
                sources.update(llm.tokens_from or {})
        if not lengths and not sources:
            continue
        said = ", ".join(f"{LENGTHS.get(k, k)} in {n} stage{'s' if n != 1 else ''}" for k, n in lengths.items())
        counted = ", ".join(f"{'usage' if k == 'usage' else 'one per chunk' if k == 'chunks' else k} for {n}"
                            for k, n in sources.items())
        lines.append(f"arm {arm}, llm output lengths: {said or 'as the scenario asked'}"
                     + (f"; output tokens counted from {counted} requests" if counted else ""))
    return lines
