"""The mixed workload: LLM, embedding and ASR traffic from one scenario, as a campaign.

    locust --headless -f locustfiles/mixed.py --scenario scenarios/day19.yaml --results-dir results/day19
"""

from locust import events

from bench_plugin import ASRUser, CampaignShape, EmbeddingUser, LLMUser, add_arguments, register

__all__ = ["ASRUser", "CampaignShape", "EmbeddingUser", "LLMUser"]

events.init_command_line_parser.add_listener(add_arguments)
events.init.add_listener(lambda environment, **_: register(environment))
