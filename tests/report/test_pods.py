"""The pods in the report: the pods panel on each trial's timeline and the "Scheduling" tables of the markdown,
from a synthetic campaign whose pod events went through the real Recorder (conftest.add_pod_events); a
campaign of the local backend (no pod events) has neither."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from bench_plugin.report.html import write_report

MakeCampaign = Callable[..., Path]
PANEL = "pods: what the cluster did"


def figure(path: Path, trial: int) -> str:
    text = path.read_text(encoding="utf-8")
    match = re.search(rf'<figure class="plot" id="timeline-trial-{trial}".*?</figure>', text, re.S)
    assert match, trial
    return match.group(0)


def test_each_timeline_has_a_pods_panel_above_the_placement(pods_report: Path) -> None:
    for trial in (1, 2, 3, 4):
        drawn = figure(pods_report, trial).split("<svg", 1)[1]
        assert PANEL in drawn and drawn.index(PANEL) < drawn.index("placement and readiness"), trial
        assert "Pending (not scheduled)" in drawn and "on gpu-a" in drawn and "Ready" in drawn
    exclusive = figure(pods_report, 1)
    assert "FailedScheduling" not in exclusive.split("<svg", 1)[1]  # none was refused
    assert "10f9c-x0z" in exclusive  # a row per pod, named without its bench-&lt;class&gt;- prefix


def test_failed_scheduling_with_its_first_reason_preemption_eviction_and_deletion(pods_report: Path) -> None:
    shared = figure(pods_report, 4)
    drawn, caption = shared.split("<svg", 1)[1].split("</svg>")[0], shared.split("<figcaption>")[1]
    for words in ("FailedScheduling, first:", "Insufficient", "nvidia.com/gpu.shared", "preempted", "evicted",
                  "deletion asked", "45c1e-r2p", "49b7d-u9q"):
        assert words in drawn, words
    assert "The top panel shows each of the trial&#x27;s 5 workload pods" in caption
    assert "The scheduler refused 5 attempt(s); first: &quot;0/1 nodes are available: 1 Insufficient" in caption
    # every pod's spans and marks are data marks (a browser test counts them)
    assert len(re.findall(r'id="data-timeline-trial-4-', shared)) > len(re.findall(r'id="data-timeline-trial-2-',
                                                                                    figure(pods_report, 2)))


def test_the_markdown_has_a_scheduling_table_per_trial(pods_report: Path) -> None:
    for name in ("report.md", "summary.md"):
        text = (pods_report.parent / name).read_text(encoding="utf-8")
        section = text.split("Scheduling\n", 1)[1]
        assert "### Trial 4: arm shared, repeat 2" in section or "#### Trial 4: arm shared, repeat 2" in section, name
        assert "| pod | class | node | pending s | FailedScheduling reasons | preempted / evicted |" in section
        assert ("| bench-asr-45c1e-r2p | asr | - | 2.5 (never scheduled: until trial end) | "
                "node(s) were unschedulable (4) | - |") in section, name
        assert "| bench-embedding-41f9c-x1z | embedding | gpu-a | 0.0 | - | preempted by bench-llm-49b7d-u9q |" \
            in section
        assert "evicted (EvictionByEvictionAPI: Eviction API: evicting)" in section
        assert ("| bench-asr-22f9c-x2z | asr | gpu-a | 2.0 | Insufficient nvidia.com/gpu.shared (2) | - |"
                in section), name
        assert "- **shared**: longest Pending 2.5 s" in section and "preempted 1, evicted 1" in section
    report = (pods_report.parent / "report.md").read_text(encoding="utf-8")
    assert report.index("## Per-stage figures") < report.index("## Scheduling") < report.index("## Conditions")


def test_summary_json_carries_the_pods(pods_report: Path) -> None:
    data = json.loads((pods_report.parent / "summary.json").read_text(encoding="utf-8"))
    pods = {p["pod"]: p for p in data["trials"][3]["pods"]}
    assert pods["bench-asr-45c1e-r2p"]["pending_until"] == "trial end"
    assert pods["bench-embedding-41f9c-x1z"]["preempted_by"] == "bench-llm-49b7d-u9q"
    assert data["arms"]["shared"]["pods"]["reasons"] == {"node(s) were unschedulable": 4,
                                                         "Insufficient nvidia.com/gpu.shared": 3}


def test_the_same_pod_events_give_the_same_bytes(make_campaign: MakeCampaign, pods_report: Path) -> None:
    again = write_report(make_campaign(pods=True))
    assert again.read_bytes() == pods_report.read_bytes()
    assert (again.parent / "report.md").read_bytes() == (pods_report.parent / "report.md").read_bytes()


def test_a_local_backend_campaign_has_no_pods_panel_nor_table(default_results: Path, default_report: Path) -> None:
    assert PANEL not in default_report.read_text(encoding="utf-8")
    assert "Scheduling" not in (default_results / "report.md").read_text(encoding="utf-8")
    assert "Scheduling" not in (default_results / "summary.md").read_text(encoding="utf-8")
    data = json.loads((default_results / "summary.json").read_text(encoding="utf-8"))
    assert {t["pods"] for t in data["trials"]} == {None} and {a["pods"] for a in data["arms"].values()} == {None}
