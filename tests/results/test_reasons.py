"""A stage verdict's reasons: typed items in summary/4, and an older file's strings read into the same items."""

from __future__ import annotations

import json
from pathlib import Path

from bench_plugin.report.markdown import render_report
from bench_plugin.results.reasons import Reason, RunFlag, from_string, reason
from bench_plugin.results.summary import SCHEMA, StageComparison, load_summary

ROOT = Path(__file__).resolve().parents[2]


def test_an_older_files_reason_reads_as_its_sentence_and_the_items_it_listed() -> None:
    lag = ("the load generator fell behind, so latency here is partly the client's: shared repeat 1: send lag P99 "
           "13.1 ms for llm (limit 10 ms); exclusive repeat 2: send lag P99 11.1 ms for llm (limit 10 ms)")
    slo = "llm p95 3.06x its SLO (9176 ms vs 3000 ms) (mean; over the limit in 3 of 3 repeats)"
    assert from_string(lag) == reason("the load generator fell behind, so latency here is partly the client's",
                                      ["shared repeat 1: send lag P99 13.1 ms for llm (limit 10 ms)",
                                       "exclusive repeat 2: send lag P99 11.1 ms for llm (limit 10 ms)"])
    assert from_string(slo) == reason(slo)  # "; " inside parentheses does not split
    assert from_string("a; b") == reason("a", ["b"])
    # its words make the old string again: the verdict's sentence, which joined them, reads as it did
    assert str(from_string(lag)) == lag and str(reason(slo)) == slo


def test_a_reason_is_written_with_its_items_only_where_it_has_some() -> None:
    assert reason("kept").model_dump(mode="json") == {"text": "kept"}
    assert reason("behind", ["a", "b"]).model_dump(mode="json") == {"text": "behind", "items": ["a", "b"]}
    assert reason("behind", []) == Reason(text="behind")


def test_a_summary_of_schema_3_reads_and_renders_as_the_same_document(tmp_path: Path) -> None:
    """docs/results/h200-day19 in the form summary/3 wrote it (each reason one string, its items joined in, and each
    run set apart as ``<arm> repeat <r>: <why>``, as the committed file was until /4): it reads as the /4 document,
    and its report is the same page."""
    path = ROOT / "docs" / "results" / "h200-day19" / "summary.json"
    now = json.loads(path.read_text(encoding="utf-8"))
    assert now["schema"] == SCHEMA == "bench_plugin.summary/4"
    listed = [r for arm in now["comparison"]["arms"].values() for s in arm["stages"] for r in s["reasons"]
              if r.get("items")]
    assert listed, "the campaign has a reason with items (a run whose load generator fell behind)"
    old = json.loads(json.dumps(now))
    old["schema"] = "bench_plugin.summary/3"
    for arm in old["comparison"]["arms"].values():
        for stage in arm["stages"]:
            stage["reasons"] = [str(Reason.model_validate(r)) for r in stage["reasons"]]
            for flags in ("generator_limited", "host_busy", "protocol_failure"):
                stage[flags] = [str(RunFlag.model_validate(f)) for f in stage.get(flags, [])]
    (tmp_path / "summary.json").write_text(json.dumps(old), encoding="utf-8")
    read, committed = load_summary(tmp_path / "summary.json"), load_summary(path)
    assert read == committed
    assert render_report(read) == render_report(committed)


def test_a_run_set_apart_is_its_arm_repeat_and_why_and_an_older_files_string_reads_the_same() -> None:
    flag = RunFlag(arm="mps-llm-capped", repeat=2, why="CPU-bound: send lag P99 12.0 ms for llm (limit 10 ms); 1 "
                   "process, 0.97 cores in all")
    assert flag.model_dump(mode="json") == {"arm": "mps-llm-capped", "repeat": 2, "why": flag.why}
    older = StageComparison.model_validate({
        "index": 0, "offered": {}, "repeats": 1, "classes": {}, "goodput_per_device": {"mean": None, "ci95": None,
                                                                                      "values": []},
        "generator_limited": [str(flag)], "host_busy": ["exclusive repeat 1: load average 3.1 on 2 cores"]})
    assert older.generator_limited == [flag]
    assert older.host_busy == [RunFlag(arm="exclusive", repeat=1, why="load average 3.1 on 2 cores")]
    assert str(older.generator_limited[0]) == str(flag)
