"""The master's inbox: a worker's messages that come while the campaign is still being set up are kept.

Driven through a real Locust MasterRunner's own dispatch table (``custom_messages``, what its
client listener calls for a message type it does not handle itself) on a loopback port.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness import free_port
from locust import User
from locust.env import Environment
from locust.rpc.protocol import Message
from locust.runners import MasterRunner

from bench_plugin.loadgen import protocol
from bench_plugin.loadgen.fleet import Inbox


class _Nobody(User):
    abstract = False


@pytest.fixture
def runner() -> Iterator[MasterRunner]:
    environment = Environment(user_classes=[_Nobody])
    master = environment.create_master_runner("127.0.0.1", free_port())
    yield master
    master.quit()


def _arrive(runner: MasterRunner, kind: str, node: str) -> None:
    listener, _ = runner.custom_messages[kind]
    listener(environment=runner.environment, msg=Message(kind, {"from": node}, node))


def test_messages_before_the_campaign_is_ready_wait_and_come_in_order(runner: MasterRunner) -> None:
    inbox = Inbox(runner)
    assert set(Inbox.KINDS) <= set(runner.custom_messages)  # registered at once: Locust drops unknown types
    _arrive(runner, protocol.HELLO, "w1")
    _arrive(runner, protocol.HELLO, "w2")
    _arrive(runner, protocol.READY, "w1")
    seen: list[tuple[str, str]] = []

    def handler(kind: str) -> Any:
        return lambda msg, **_: seen.append((kind, msg.node_id))

    inbox.deliver({kind: handler(kind) for kind in Inbox.KINDS})
    assert seen == [(protocol.HELLO, "w1"), (protocol.HELLO, "w2"), (protocol.READY, "w1")]
    _arrive(runner, protocol.REPORT, "w2")  # once delivered, straight through
    assert seen[-1] == (protocol.REPORT, "w2")
