"""The Locust users: one driver class per workload class, all on one OpenAI-compatible HTTP base."""

from bench_plugin.users.asr import ASRUser
from bench_plugin.users.base import WorkloadUser
from bench_plugin.users.embedding import EmbeddingUser
from bench_plugin.users.llm import LLMUser

USER_CLASSES: dict[str, type[WorkloadUser]] = {"llm": LLMUser, "embedding": EmbeddingUser, "asr": ASRUser}
"""The driver class of each workload class."""

__all__ = ["USER_CLASSES", "ASRUser", "EmbeddingUser", "LLMUser", "WorkloadUser"]
