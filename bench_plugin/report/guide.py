""""How to read this": one short paragraph per section of report.html and report.md.

Each says what the section shows and how to read it in one to three sentences; report.html puts it
under the section's heading as ``<p class="how">``, report.md as an italic line. Keys are the
sections' ids (report/page.py Section.id), one page's for both.
"""

from __future__ import annotations

from bench_plugin.analysis.intervals import samples_needed
from bench_plugin.report.tables import esc

HOW_TO_READ: dict[str, str] = {
    "answer": (
        "The answer in short: whether sharing pays off here, then per arm its call, the figure it rests on "
        "(requests per second within every SLO, per device, against the control's at the same load, with the 95% "
        "CI of their ratio), how far it holds, what limits it and the next step. The sections below say why."),
    "where-it-goes": (
        "Per sharing arm, stage and class, how much latency the arm adds against the control at the same stage and "
        "where it goes: waiting in the server's queue, the server computing, the client's own wait, the rest "
        "(network, reading the reply); around the P95 where the replies said their split, else on average from the "
        "server's metrics, with the 95% interval over paired repeats. A growing queue calls for more replicas or "
        "batching, growing compute for another sharing mode or a bigger slice."),
    "cut-short": (
        "Stages that did not run their course (stopped, a load generator lost, a server gone), with what they "
        "measured until then, from their own trial. They count in no figure over repeats, verdict or boundary."),
    "verdict": (
        "One row per arm: its verdict against the control and the highest load it keeps every SLO at (its operating "
        "boundary). Under each sharing arm, per stage, goodput per device against the control decides: higher with "
        "every SLO and error budget kept is worth it, higher at an SLO's cost a trade-off, not higher a loss (with "
        "fewer than 2 paired repeats: inconclusive; where a load generator fell behind: generator-limited, no "
        "verdict). The reasons say what decided each stage."),
    "envelope": (
        "Each arm's boundary along every ray (a load mix) it searched: the load per class at which the first SLO "
        "or error budget breaks, its 95% CI over repeats, the highest load that passed, whether holding it for the "
        "sustain time confirmed it, and what breaks first. The model explains the shape (one device, each request "
        "taking a share of it; every P95 growing as 1/(1 - busy)) and predicts the rays it was not fit on: its "
        "error there says how far to trust it between rays."),
    "plan": (
        "How many GPUs hold each traffic under each arm, with the headroom asked for: which classes share which "
        "GPUs, how much the traffic can grow before the plan needs another GPU and what breaks first, the cost, and "
        "what it saves against the control (each class on GPUs of its own). A plan resting on the model outside "
        "where it was validated says so."),
    "load": (
        "Per class, its latency (P50, P95; for the LLM TTFT and TPOT P95) against the load offered to it, one line "
        "per arm, on a log scale. A line that rises steeply or crosses the dashed SLO line is where that arm stops "
        "keeping up; a hollow marker rests on too few samples to be bounded and is rough."),
    "sharing": (
        "Normalised throughput is each class's throughput over the control's at the same stage: 1 means sharing "
        "costs it nothing. Fairness (1 = equal shares), consolidation gain (the sum of the normalised throughputs: "
        "the number of classes when each is as fast as alone) and goodput per device are per stage, on axes from 0 "
        "with plain tick labels, so a small difference looks small."),
    "stages": (
        "Per stage, arm and class the figures over repeats: mean ± 95% CI, and after each percentile its sample "
        "count per repeat (n=). A percentile in italics and marked † rests on too few samples in some repeat for its "
        f"95% interval to be bounded (a P95 needs {samples_needed(0.95)}): compare it with care, and see the "
        "measurement checks for each run's interval."),
    "timelines": (
        "One timeline per trial, in seconds from its start: where each server ran and when it became ready, the "
        "stages and their outcome, failed requests, every request's latency (log scale, dashed SLO lines) and, where "
        "they were recorded, the cluster's pods and the GPU's utilisation and memory. Look for latency that climbs "
        "within a stage (queueing) and for failures at stage or segment edges."),
    "disruption": (
        "What was done to the servers or the cluster in a stage (a restart, a kill, a rollout, a drain or a node "
        "failure) and what the requests saw: the failed requests, the peak 1 s P95 against the P95 before, how long "
        "each class took to recover, and how long a restarted server's class had none."),
    "scheduling": (
        "How long each workload pod waited to be scheduled and why (the scheduler's own reasons), and which pods "
        "were preempted or evicted: time a pod spends Pending is time its class is not served."),
    "gpu-series": (
        "Per stage, the GPU series the campaign queried from Prometheus beside the same field sampled on the host "
        "(NVML or a DCGM exporter): the two should agree; a gap or a missing series is noted under its table."),
    "checks": (
        "Per trial, stage and class: whether the stage sent the load it states and whether its figures can be "
        "trusted. A flag in the last column (a load generator that fell behind, a busy host, a P95 from too few "
        "samples) weakens that run's figures; a generator-limited stage gets no verdict."),
    "errors": (
        "Failed requests per trial, stage, class and kind, with an example message, and every stage that did not "
        "complete with its reason. Errors are measurements: they count against the error budget."),
    "conditions": (
        "Everything needed to run the campaign again and to know what it measured: the scenario and its hash, the "
        "command line, the host, devices and driver, package versions, each arm's settings and each server's command "
        "line."),
}
"""Section id -> what it shows and how to read it."""


def html(section: str) -> str:
    """The paragraph for report.html (empty where a section has none); the text is plain, HTML-escaped here."""
    text = HOW_TO_READ.get(section)
    return f'<p class="how"><b>How to read this.</b> {esc(text)}</p>\n' if text else ""


def markdown(section: str) -> list[str]:
    """The lines for report.md: the paragraph in italics and a blank line (none where a section has none)."""
    text = HOW_TO_READ.get(section)
    return [f"*How to read this: {text}*", ""] if text else []
