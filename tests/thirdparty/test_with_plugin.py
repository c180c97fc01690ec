"""The plugin, run by the real `locust --headless` command, against servers no one in this project wrote.

One short campaign per server and class (CASES): the manual backend (``backend: manual``, each class's
``endpoint`` a server already running, from conftest.py), one arm, one repeat, one stage of 4 s at a low
rate. Each must exit 0 having measured every request it sent, without an error, and without the server
refusing anything the plugin sent once readiness had found out what the server honours (the warm-up is
not samples: the server's own access log is read for it). The llm cases also check the LLM figures, and
that, with the scenario's default setting, the plugin says the output lengths were set by the model
(transformers serve refuses ignore_eos and min_tokens). A scenario that asks for fixed output lengths
(``fixed_output: true``) must be refused before any load, with the server's refusal in one line.

The names the plugin gives those figures are the constants below: change them there if the plugin does.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, run_locust
from thirdparty_testlib import Server, write_scenario

from bench_plugin.loadgen.arrivals import arrival_count
from bench_plugin.results.store import open_store, read_samples

pytestmark = pytest.mark.slow

ITL_KEYS: tuple[tuple[str, ...], ...] = (("itl_ms", "p50"), ("itl_ms", "p95"), ("itl_ms", "p99"))
"""Where summary.json keeps an LLM class's inter-token latency percentiles within one stage's figures
(``trials[].stages[].classes.llm``), each as a path of keys: ``itl_ms.p50`` and so on (spell
``("itl_p95_ms",)`` for a flat key)."""

OUTPUT_LENGTHS_KEY: tuple[str, ...] = ("output_lengths",)
"""Where the same figures say how the output lengths were set."""

OUTPUT_LENGTHS_BY_MODEL = "model"
"""Its value when the model set them: the server refuses or ignores ignore_eos/min_tokens, or the scenario
asks for none (its other value says the server honoured the fixed lengths)."""

EXIT_REFUSED = 2
"""The plugin's exit status for a campaign that stops before any load (a refusal, or a trial whose readiness
failed: bench_plugin/plugin.py, EXIT_CODES)."""

METRICS_PATHS = ("/metrics", "/models")
"""What the server-metrics reader asks of a server (telemetry/server_scrape.py): its page, and infinity's queue."""

LLM_REQUESTS = {"count": 4, "input_tokens": 16, "output_tokens": 8, "seed": 1}
TIMEOUT_S = 180


@dataclass(frozen=True)
class Case:
    """One campaign: which server (a fixture of conftest.py), which class, its rate and request set."""

    server: str
    workload: str
    rate: float
    requests: dict[str, Any]


CASES = {
    "llm-transformers-serve": Case("transformers_server", "llm", 1.0, LLM_REQUESTS),
    "llm-transformers-serve-continuous-batching": Case("transformers_cb_server", "llm", 1.0, LLM_REQUESTS),
    "asr-transformers-serve": Case("transformers_server", "asr", 1.0, {"count": 2}),
    "embedding-infinity": Case("infinity_server", "embedding", 2.0,
                               {"count": 4, "batch_size": 4, "input_tokens": 16, "seed": 2}),
}
LLM_CASES = [name for name, case in CASES.items() if case.workload == "llm"]


@dataclass(frozen=True)
class Campaign:
    """A finished campaign: its exit status and output, its results folder, what the server logged meanwhile."""

    name: str
    done: subprocess.CompletedProcess[str]
    results: Path
    server_log: str

    def summary(self) -> dict[str, Any]:
        """summary.json; fails the test (with the run's output) when the run wrote none."""
        path = self.results / "summary.json"
        assert path.is_file(), f"{self.name} wrote no summary.json; its output:\n{self.done.stdout[-4000:]}"
        return json.loads(path.read_text())

    def stages(self) -> Iterator[dict[str, Any]]:
        for trial in self.summary()["trials"]:
            yield from trial["stages"]


def class_spec(case: Case, server: Server) -> dict[str, Any]:
    return {"model": server.models[case.workload], "endpoint": server.url, "requests": dict(case.requests),
            "slo": {"p95_ms": 10000}, "request_timeout_s": 60}


def campaign_run(name: str, classes: dict[str, Any], load: dict[str, float], server: Server,
                 where: Path) -> Campaign:
    where.mkdir(parents=True, exist_ok=True)
    scenario = write_scenario(where / "scenario.yaml", name, classes, load)
    results = where / "results"
    since = server.log_size()
    done = run_locust(["-f", str(ROOT / "locustfiles" / "mixed.py"), "--scenario", str(scenario),
                       "--results-dir", str(results)], timeout=TIMEOUT_S)
    return Campaign(name, done, results, server.log_text(since))


class Campaigns:
    """Each case's campaign, run once a module, on first use."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.done: dict[str, Campaign] = {}

    def get(self, name: str, request: pytest.FixtureRequest) -> Campaign:
        if name not in self.done:
            case = CASES[name]
            server: Server = request.getfixturevalue(case.server)
            self.done[name] = campaign_run(name, {case.workload: class_spec(case, server)},
                                           {case.workload: case.rate}, server, self.work / name)
        return self.done[name]


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory, thirdparty: object) -> Campaigns:
    del thirdparty  # named for tools/run_tests.py: this file shares the session's servers (and lane)
    return Campaigns(tmp_path_factory.mktemp("campaigns"))


@pytest.fixture(scope="module", params=sorted(CASES))
def campaign(request: pytest.FixtureRequest, campaigns: Campaigns) -> Campaign:
    return campaigns.get(request.param, request)


@pytest.fixture(scope="module", params=LLM_CASES)
def llm_campaign(request: pytest.FixtureRequest, campaigns: Campaigns) -> Campaign:
    return campaigns.get(request.param, request)


def lookup(figures: dict[str, Any], path: tuple[str, ...]) -> Any:
    """``figures[path[0]][path[1]]...``; KeyError naming the path where a key is missing."""
    value: Any = figures
    for i, key in enumerate(path):
        if not isinstance(value, dict) or key not in value:
            raise KeyError(f"{'.'.join(path[:i + 1])} is not in the figures (keys: {sorted(figures)})")
        value = value[key]
    return value


def llm_figures(campaign: Campaign) -> list[dict[str, Any]]:
    return [stage["classes"]["llm"] for stage in campaign.stages()]


def test_the_campaign_exits_0(campaign: Campaign) -> None:
    assert campaign.done.returncode == 0, campaign.done.stdout[-4000:]
    assert "Traceback" not in campaign.done.stdout, campaign.done.stdout[-4000:]


def test_every_request_is_measured_and_none_failed(campaign: Campaign) -> None:
    summary = campaign.summary()
    assert [t["status"] for t in summary["trials"]] == ["completed"]
    assert summary["conditions"]["backend"]["backend"] == "manual"
    for stage in campaign.stages():
        for name, rate in stage["offered"].items():
            figures = stage["classes"][name]
            expected = arrival_count(rate, stage["planned_s"])
            assert stage["arrivals"][name] == figures["requests"] == expected, (name, stage["arrivals"], figures)
            assert figures["errors"] == 0, figures["errors_by_kind"]
            assert figures["latency_ms"]["p50"] is not None


def test_the_server_refused_nothing_the_plugin_sent_once_it_knew(campaign: Campaign) -> None:
    """Warm-up and measured requests (the first are not samples: the server's own access log says). A
    request refused before the first one the server accepted is readiness finding out what it honours (with
    ``fixed_output: auto``, the default, the llm probe asks for ignore_eos/min_tokens first); none after.
    The server-metrics reader's GETs are not the workload's (test_server_metrics_are_read_or_said_missing)."""
    access = [(path, status) for method, path, status in re.findall(r'"(GET|POST) (\S+) HTTP/1\.1" (\d{3})',
                                                                     campaign.server_log)
              if not (method == "GET" and path in METRICS_PATHS)]
    assert access, f"the server logged no request during the campaign:\n{campaign.server_log[-3000:]}"
    accepted = [i for i, (_, status) in enumerate(access) if status.startswith("2")]
    assert accepted, f"the server accepted no request:\n{campaign.server_log[-3000:]}"
    refused = [(path, status) for path, status in access[accepted[0]:] if not status.startswith("2")]
    assert not refused, f"the server answered {refused}:\n{campaign.server_log[-3000:]}"


def test_server_metrics_are_read_or_said_missing(campaign: Campaign) -> None:
    """infinity exports its metrics (HTTP durations on /metrics, its queue in /models): recognised, its queue read
    through the stage. transformers serve exports none: said once, as a 404, and never asked again."""
    with open_store(campaign.results / "results.sqlite") as db:
        (detail,) = [json.loads(row[0]) for row in db.execute("SELECT detail FROM events WHERE kind='server_metrics'")]
        quantities = {row[0] for row in db.execute("SELECT DISTINCT quantity FROM server_series WHERE stage >= 0")}
    (source,) = detail["sources"]
    asked = re.findall(r'"GET /metrics HTTP/1\.1" (\d{3})', campaign.server_log)
    if campaign.name.endswith("infinity"):
        assert source["engine"] == "infinity" and source["problems"] == {}, source
        assert source["names"] == {"queue_depth": "/models stats.queue_absolute"} and quantities == {"queue_depth"}
        assert len(asked) >= 4 and set(asked) == {"200"}  # twice a second through a 4-s stage
    else:
        assert source["engine"] is None and source["scrapes"] == 0 and not quantities, source
        assert source["problems"].get("HTTP 404 from the metrics endpoint: no metrics at this URL, not read again") == 1
        assert set(source["problems"]) <= {"HTTP 404 from the metrics endpoint: no metrics at this URL, not read again",
                                           "TimeoutError: timed out"}, source  # a server busy at the start: late
        assert set(asked) == {"404"} and len(asked) == sum(source["problems"].values())


def test_llm_ttft_and_tpot_are_measured(llm_campaign: Campaign) -> None:
    for figures in llm_figures(llm_campaign):
        assert figures["ttft_ms"]["p50"] is not None and figures["ttft_ms"]["p95"] is not None, figures
        assert figures["tpot_ms"]["p95"] is not None, figures
        assert 0 < figures["ttft_ms"]["p50"] <= figures["latency_ms"]["p50"]


def test_llm_inter_token_latency_percentiles(llm_campaign: Campaign) -> None:
    for figures in llm_figures(llm_campaign):
        values = {".".join(path): lookup(figures, path) for path in ITL_KEYS}
        assert all(isinstance(v, float) and v >= 0 for v in values.values()), values
        assert list(values.values()) == sorted(values.values()), values  # p50 <= p95 <= p99


def test_llm_output_lengths_are_labelled_as_set_by_the_model(llm_campaign: Campaign) -> None:
    for figures in llm_figures(llm_campaign):
        assert lookup(figures, OUTPUT_LENGTHS_KEY) == OUTPUT_LENGTHS_BY_MODEL, figures


def test_fixed_output_lengths_are_refused_before_any_load(transformers_server: Server, tmp_path: Path) -> None:
    """transformers serve answers 422 to ignore_eos and min_tokens: a scenario that asks for them (``fixed_output:
    true``) cannot measure what it says, and must stop before any load with that reason in one line."""
    case = CASES["llm-transformers-serve"]
    llm = {**class_spec(case, transformers_server), "fixed_output": True}
    refused = campaign_run("fixed-output", {"llm": llm}, {"llm": case.rate}, transformers_server, tmp_path)
    output = refused.done.stdout
    assert refused.done.returncode == EXIT_REFUSED, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    errors = [line for line in output.splitlines() if line.startswith("bench_plugin: error:")]
    assert len(errors) == 1, output[-4000:]
    for word in ("ignore_eos", "min_tokens", "422"):
        assert word in errors[0], errors[0]
    store = refused.results / "results.sqlite"
    if store.is_file():
        with open_store(store) as db:
            samples = len(read_samples(db))
        assert samples == 0, f"{samples} requests were measured before the refusal"
