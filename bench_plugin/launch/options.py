"""The plugin's Locust command-line options; each also reads an environment variable, Locust style."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from bench_plugin.launch import processes
from bench_plugin.launch.backend_choice import BACKENDS, HOST_OPTIONS


def add_arguments(parser: Any) -> None:
    """Add the plugin's options to Locust's parser (listener of ``events.init_command_line_parser``), and size the
    load-generating processes on what it parses (processes.install: before Locust forks any)."""
    processes.install(parser)
    group = parser.add_argument_group("bench_plugin", "GPU sharing campaign (bench_plugin)")
    group.add_argument("--scenario", type=str, env_var="LOCUST_SCENARIO", default=None,
                       help="Scenario YAML (or ConfigMap) to run as a campaign")
    group.add_argument("--results-dir", type=str, env_var="LOCUST_RESULTS_DIR", default=None,
                       help="Where results go (default: results/<scenario>-<UTC time>)")
    group.add_argument("--resume", type=str, env_var="LOCUST_RESUME", default=None, metavar="DIR",
                       help="Continue the interrupted campaign whose results are in DIR (its --results-dir): "
                            "segments that ended are kept, the rest run; refused if the experiment differs")
    group.add_argument("--warm-start-from", dest="warm_start_from", type=str, env_var="LOCUST_WARM_START_FROM",
                       default=None, metavar="DIR",
                       help="Start each ray's search, in each arm's first repeat, at the bracket an earlier campaign "
                            "(its results DIR) left it in: only where the search first looks, every boundary resting "
                            "on this campaign's own probes (same arm, ray, classes and rates)")
    group.add_argument("--no-report", dest="no_report", action="store_true", env_var="LOCUST_NO_REPORT",
                       default=False,
                       help="End with results.sqlite, summary.json and summary.md only: report.html and report.md "
                            "(matplotlib, seconds on a large campaign) are left to `bench-plugin report DIR`")
    group.add_argument("--arm", type=str, env_var="LOCUST_ARM", default=None,
                       help="Run only this arm (required with an explicit host: the manual backend)")
    group.add_argument("--repeats", type=int, env_var="LOCUST_REPEATS", default=None,
                       help="Override the scenario's repeats")
    group.add_argument("--stage-duration", type=float, env_var="LOCUST_STAGE_DURATION", default=None,
                       help="Override every stage's duration (seconds), for quick runs")
    group.add_argument("--dcgm-url", type=str, env_var="LOCUST_DCGM_URL", default=None,
                       help="A dcgm-exporter's /metrics URL to scrape during trials (instead of NVML on this host)")
    group.add_argument("--prometheus-url", type=str, env_var="LOCUST_PROMETHEUS_URL", default=None,
                       help="A Prometheus that scrapes dcgm-exporter: each stage's GPU series are queried from it")
    group.add_argument("--prometheus-lag", type=float, env_var="LOCUST_PROMETHEUS_LAG", default=10.0,
                       help="Seconds after a stage before its series are queried (Prometheus must have scraped "
                            "them; default 10)")
    for name, attr in HOST_OPTIONS.items():
        group.add_argument(f"--{name}-host", dest=attr, type=str, env_var=f"LOCUST_{attr.upper()}", default=None,
                           help=f"Base URL of an OpenAI-compatible server for the {name} class (manual backend)")
    group.add_argument("--backend", type=str, env_var="LOCUST_BACKEND", default=None,
                       help=f"Who applies the arms: {', '.join(BACKENDS)} (default: the scenario's backend; an "
                            "explicit host means manual)")
    group.add_argument("--kubeconfig", type=str, env_var="LOCUST_KUBECONFIG", default=None,
                       help="Kubernetes backend: the kubeconfig (default: $KUBECONFIG, then the in-cluster "
                            "service account, then ~/.kube/config)")
    group.add_argument("--namespace", type=str, env_var="LOCUST_NAMESPACE", default=None,
                       help="Kubernetes backend: the namespace of the workloads (default: the scenario's "
                            "kubernetes.namespace, bench)")
    group.add_argument("--service-url", dest="service_url", action="append", type=str, env_var="LOCUST_SERVICE_URL",
                       default=None, metavar="CLASS=URL",
                       help="Kubernetes backend: where the load generators reach a class's Service from outside "
                            "the cluster (kubectl port-forward); repeatable, or comma-separated in the env var "
                            "(default: http://bench-<class>.<namespace>.svc:<port>)")


def check_base_url(where: str, url: str) -> str:
    """``url`` if it is an http(s) base URL with a host and a usable port; else ValueError naming ``where``.

    Checked before any request: a URL without a scheme (``localhost:8000``) or host would otherwise be
    refused only once the readiness timeout ran out, minutes later.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{where} {url!r}: not an http(s) base URL with a host; write e.g. http://{url}"
                         if "://" not in url else f"{where} {url!r}: not an http(s) base URL with a host")
    try:
        parts.port  # noqa: B018  # raises on a port that is not a number in 0-65535
    except ValueError:
        raise ValueError(f"{where} {url!r}: the port is not a number from 1 to 65535") from None
    return url


def parse_service_urls(values: list[str] | None, class_names: list[str]) -> dict[str, str]:
    """``--service-url`` values (each ``CLASS=URL``, or several comma-separated) -> class -> URL.

    Raises ValueError with one line naming the option and the value that is wrong.
    """
    out: dict[str, str] = {}
    for value in values or []:
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            name, sep, url = item.partition("=")
            name, url = name.strip(), url.strip()
            if not sep or not name or not url:
                raise ValueError(f"--service-url {item!r}: expected CLASS=URL, e.g. llm=http://127.0.0.1:8000")
            if name not in class_names:
                raise ValueError(f"--service-url {item!r}: {name!r} is not a class of this scenario "
                                 f"(classes: {', '.join(class_names)})")
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"--service-url {item!r}: {url!r} is not an http(s) URL")
            if name in out and out[name] != url:
                raise ValueError(f"--service-url {item!r}: class {name} already has {out[name]}")
            out[name] = url
    return out
