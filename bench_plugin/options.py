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
    for name, attr in HOST_OPTIONS.items():
        group.add_argument(f"--{name}-host", dest=attr, type=str, env_var=f"LOCUST_{attr.upper()}", default=None,
                           help=f"Base URL of an OpenAI-compatible server for the {name} class (manual backend)")
