"""bench_plugin: a Locust plugin that answers "is sharing a GPU between LLM, embedding and ASR worth it?"

Importing this package has no side effects. A locustfile wires it up explicitly::

    from locust import events
    from bench_plugin import ASRUser, CampaignShape, EmbeddingUser, LLMUser, add_arguments, register

    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(lambda environment, **_: register(environment))
"""

from bench_plugin.options import add_arguments
from bench_plugin.plugin import BenchPlugin, register
from bench_plugin.scenario import Scenario, ScenarioError, load_scenario
from bench_plugin.shape import CampaignShape
from bench_plugin.users import ASRUser, EmbeddingUser, LLMUser, WorkloadUser

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
