"""bench_plugin: a Locust plugin that answers "is sharing a GPU between LLM, embedding and ASR worth it?"

Importing this package has no side effects and imports nothing heavy: the public names below load
on first use. That matters twice: the reference servers (``python -m bench_plugin.servers``) must
not import Locust, whose gevent monkey-patching would turn their engine threads into greenlets; and
load-generating pods need no PyTorch. A locustfile wires the plugin up explicitly::

    from locust import events
    from bench_plugin import ASRUser, CampaignShape, EmbeddingUser, LLMUser, add_arguments, register

    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(lambda environment, **_: register(environment))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench_plugin.launch.options import add_arguments
    from bench_plugin.plugin import BenchPlugin, register
    from bench_plugin.scenario import Scenario, ScenarioError, load_scenario
    from bench_plugin.shape import CampaignShape
    from bench_plugin.users import ASRUser, EmbeddingUser, LLMUser, WorkloadUser

_EXPORTS: dict[str, str] = {
    "ASRUser": "bench_plugin.users",
    "BenchPlugin": "bench_plugin.plugin",
    "CampaignShape": "bench_plugin.shape",
    "EmbeddingUser": "bench_plugin.users",
    "LLMUser": "bench_plugin.users",
    "Scenario": "bench_plugin.scenario",
    "ScenarioError": "bench_plugin.scenario",
    "WorkloadUser": "bench_plugin.users",
    "add_arguments": "bench_plugin.launch.options",
    "load_scenario": "bench_plugin.scenario",
    "register": "bench_plugin.plugin",
}

__all__ = [
    "ASRUser",
    "BenchPlugin",
    "CampaignShape",
    "EmbeddingUser",
    "LLMUser",
    "Scenario",
    "ScenarioError",
    "WorkloadUser",
    "add_arguments",
    "load_scenario",
    "register",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bench_plugin' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
