"""The plugin's Locust command-line options; each also reads an environment variable, Locust style."""

from __future__ import annotations

from typing import Any

HOST_OPTIONS: dict[str, str] = {"llm": "llm_host", "embedding": "embedding_host", "asr": "asr_host"}
"""Workload class -> the option attribute holding its explicit host."""


def add_arguments(parser: Any) -> None:
    """Add the plugin's options to Locust's parser (listener of ``events.init_command_line_parser``)."""
    group = parser.add_argument_group("bench_plugin", "GPU sharing campaign (bench_plugin)")
    group.add_argument("--scenario", type=str, env_var="LOCUST_SCENARIO", default=None,
                       help="Scenario YAML (or ConfigMap) to run as a campaign")
    group.add_argument("--results-dir", type=str, env_var="LOCUST_RESULTS_DIR", default=None,
                       help="Where results go (default: results/<scenario>-<UTC time>)")
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
