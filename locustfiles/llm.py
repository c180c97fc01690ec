"""The llm class alone: the scenario's other classes are left out of the campaign.

    locust --headless -f locustfiles/llm.py --scenario scenarios/day19.yaml
"""

from locust import events

from bench_plugin import CampaignShape, LLMUser, add_arguments, register

__all__ = ["CampaignShape", "LLMUser"]

events.init_command_line_parser.add_listener(add_arguments)
events.init.add_listener(lambda environment, **_: register(environment))
