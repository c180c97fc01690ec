"""A stage whose requests all failed with one protocol error measured nothing: it is never a boundary.

And what the stream's own record gives per class: ITL pooled over chunk gaps, tokens per chunk, TPOT up to
the last token. Samples are built by hand so every figure is known.
"""

from __future__ import annotations

from analysis_builders import objectives, stage, stats, trial

from bench_plugin.analysis.boundary import arm_boundary
from bench_plugin.analysis.summary import class_stats, protocol_failure, sole_error
from bench_plugin.results.samples import Sample, pack_gaps, protocol_signature
from bench_plugin.results.words import BoundaryStatus
from bench_plugin.run.rollback import PROTOCOL_MIN_REQUESTS, StageTally


def sample(ok: bool = True, error: str | None = None, status: int | None = None, detail: str | None = None,
           **fields: object) -> Sample:
    s = Sample(workload="llm", trial=1, segment=0, stage=0, seq=0, item=0, intended_s=100.0, sent_s=100.0,
               end_s=101.0, ok=ok, error=error, status=status, detail=detail)
    for name, value in fields.items():
        setattr(s, name, value)
    return s


REJECTED = {"ok": False, "error": "http_422", "status": 422,
            "detail": "HTTP 422: Unexpected fields in the request: {'ignore_eos', 'min_tokens'}"}


def test_which_errors_are_the_request_itself_and_which_the_load() -> None:
    assert protocol_signature(sample(**REJECTED)) == "http_422"
    assert protocol_signature(sample(False, "protocol")) == "protocol"
    assert protocol_signature(sample(False, "output_length")) == "output_length"
    for load_made in (("http_429", 429), ("http_503", 503), ("http_408", 408), ("http_404", 404), ("timeout", None),
                      ("connection", None), ("server_error", None)):
        assert protocol_signature(sample(False, *load_made)) is None, load_made
    assert protocol_signature(sample()) is None


def test_a_class_whose_every_request_failed_with_one_protocol_error_says_so() -> None:
    rejected = [sample(**REJECTED) for _ in range(6)]
    stats_ = class_stats(rejected, "llm", 10.0)
    assert stats_.sole_error == f"http_422: {REJECTED['detail']}"
    assert protocol_failure({"llm": stats_}) == f"every llm request failed with http_422: {REJECTED['detail']}"
    assert sole_error([*rejected, sample()]) is None, "one success: the errors are not the whole story"
    assert sole_error([sample(False, "timeout") for _ in range(6)]) is None, "timeouts are what load does"
    assert sole_error([*rejected, sample(False, "protocol")]) is None, "two different errors"


def test_the_boundary_of_an_arm_that_measured_only_a_protocol_error_is_not_measured() -> None:
    goals = objectives(names=("llm",))
    failed = stats(0.0, None, requests=40, errors=40)
    failed.sole_error = "http_422: Unexpected fields in the request"
    first = stage(0, {"llm": failed})
    first.protocol_failure = protocol_failure({"llm": failed})
    boundary = arm_boundary([trial("shared", 1, [first, stage(1, {"llm": stats(p95=2000.0)})])], goals)
    assert boundary.status == BoundaryStatus.NOT_MEASURED and "Unexpected fields" in boundary.text, boundary
    # the same errors without the protocol reading were the old, wrong answer: a boundary below the lowest stage
    plain = stage(0, {"llm": stats(0.0, None, requests=40, errors=40)})
    assert arm_boundary([trial("shared", 1, [plain])], goals).status == BoundaryStatus.BELOW_LOWEST


def test_the_campaign_stops_a_stage_once_a_class_keeps_failing_with_one_protocol_error() -> None:
    tally = StageTally((1, 0, 0))
    tally.add(sample())  # one success before the server changed
    for _ in range(PROTOCOL_MIN_REQUESTS - 1):
        tally.add(sample(**REJECTED))
    assert tally.protocol_failure() is None, "not yet enough in a row"
    tally.add(sample(**REJECTED))
    found = tally.protocol_failure()
    assert found is not None and f"{PROTOCOL_MIN_REQUESTS} of {PROTOCOL_MIN_REQUESTS + 1} requests" in found
    assert "http_422" in found and "Unexpected fields" in found
    tally.add(sample(False, "timeout"))
    assert tally.protocol_failure() is None, "a load-made error ends the streak"


def test_itl_is_every_chunk_gap_pooled_and_tpot_ends_at_the_last_token() -> None:
    # two requests: 4 chunks of one token 10 ms apart, and 3 chunks of two tokens 30 ms apart (a batching server)
    one = sample(first_token_s=100.1, last_token_s=100.13, output_tokens=4, chunks=4, tokens_from="usage",
                 chunk_gaps=pack_gaps([0.01, 0.01, 0.01]))
    two = sample(first_token_s=100.1, last_token_s=100.16, output_tokens=6, chunks=3, tokens_from="usage",
                 chunk_gaps=pack_gaps([0.03, 0.03]))
    assert [round(v, 3) for v in one.itl_ms()] == [10.0, 10.0, 10.0]
    assert round(one.tpot_ms or 0, 6) == 10.0, "(last - first) / (tokens - 1), not up to the stream's end"
    assert round(two.tpot_ms or 0, 6) == 12.0, "TPOT spreads a chunk's tokens; ITL does not"
    figures = class_stats([one, two], "llm", 10.0)
    assert figures.itl_ms is not None and round(figures.itl_ms["p50"] or 0, 3) == 10.0
    assert round(figures.itl_ms["p99"] or 0, 3) == 30.0
    assert figures.tokens_per_chunk == 10 / 7 and figures.tokens_from == {"usage": 2}
    old = sample(first_token_s=100.1, output_tokens=4)  # a store before version 5: no chunk times
    assert class_stats([old], "llm", 10.0).itl_ms is None and round(old.tpot_ms or 0, 3) == 300.0
