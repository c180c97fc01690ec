"""Shares: each class's arrivals split over the processes that can send it, every arrival exactly once."""

from __future__ import annotations

import pytest

from bench_plugin.loadgen.shares import Share, plan_shares, unsent


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
@pytest.mark.parametrize("n", [0, 1, 7, 100])
def test_shares_partition_the_arrivals(workers: int, n: int) -> None:
    shares = plan_shares({f"w{i}": {"llm"} for i in range(workers)}, ["llm"])
    sent = sorted(k for held in shares.values() for k in held["llm"].of(n))
    assert sent == list(range(n))
    assert all(held["llm"].holds(k) for held in shares.values() for k in held["llm"].of(n))


def test_a_class_goes_only_to_processes_that_can_send_it() -> None:
    shares = plan_shares({"a": {"llm", "asr"}, "b": {"llm"}, "c": {"embedding"}}, ["llm", "embedding", "asr"])
    assert shares == {"a": {"llm": Share(0, 2), "asr": Share(0, 1)}, "b": {"llm": Share(1, 2)},
                      "c": {"embedding": Share(0, 1)}}


def test_the_same_processes_give_the_same_shares_whatever_their_order() -> None:
    one = plan_shares({"b": {"llm"}, "a": {"llm"}}, ["llm"])
    two = plan_shares({"a": {"llm"}, "b": {"llm"}}, ["llm"])
    assert one == two == {"a": {"llm": Share(0, 2)}, "b": {"llm": Share(1, 2)}}


def test_a_class_nobody_can_send_is_named() -> None:
    shares = plan_shares({"a": {"llm"}}, ["llm", "asr"])
    assert unsent(shares, ["llm", "asr"]) == ["asr"]
