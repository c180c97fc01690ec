"""What each arm's servers made of the LLM and embedding requests, for the reports' conditions: one line each.

Whether the output lengths were the request set's (the server honoured ignore_eos/min_tokens: every
arm generated the same tokens) or set by the model (bench_plugin.run.readiness: the server rejects or
ignores them, or the scenario asks for none), and where the token counts came from (the server's
``usage``, or one token per chunk). Lengths set by the model can differ between arms: their TPOT and
throughput then compare unequal work.

For the embedding class: the ``encoding_format`` its requests asked for, and how the vectors came back where
a server answered otherwise (SGLang answers floats to a base64 request): a float reply is about four times
the bytes to send and to read, for the server and for the load generator alike.
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


def embedding_format_lines(summary: Summary) -> list[str]:
    """``embedding vectors asked as base64 ...``, and per arm whose servers answered in another form, how."""
    asked = summary.embedding_format
    if asked is None:
        return []
    lines = [f"embedding vectors asked as {asked} (encoding_format)"]
    for arm in dict.fromkeys(t.arm for t in summary.trials):
        told: Counter[str] = Counter()
        for trial in (t for t in summary.trials if t.arm == arm):
            for stage in trial.stages:
                embedding = stage.classes.get("embedding")
                told.update(embedding.reply_formats or {} if embedding is not None else {})
        other = {form: n for form, n in told.items() if form != asked}
        if other:
            said = ", ".join(f"{form} in {n:,} of {sum(told.values()):,} requests" for form, n in other.items())
            lines.append(f"arm {arm}: the embedding server answered {said} (asked {asked})")
    return lines
