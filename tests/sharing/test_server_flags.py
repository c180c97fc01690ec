"""The reference servers' sharing flags: --memory-limit-mib and --stream-priority.

They act on CUDA only. Here (no GPU) they must be parsed, and refused with one clear line and exit
status 2 rather than silently ignored; what they do on a GPU (the allocator cap, the stream's
priority) is checked by the device run on the lent H200.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from sharing_testlib import ROOT

from bench_plugin.servers.__main__ import build_parser, main
from bench_plugin.servers.torch_common import check_sharing_flags, make_model_stream

KINDS = ["llm", "embedding", "asr"]


@pytest.mark.parametrize("kind", KINDS)
def test_flags_are_parsed_with_defaults(kind: str) -> None:
    parser = build_parser()
    args = parser.parse_args([kind, "--memory-limit-mib", "2048", "--stream-priority", "high"])
    assert (args.memory_limit_mib, args.stream_priority) == (2048, "high")
    args = parser.parse_args([kind])
    assert (args.memory_limit_mib, args.stream_priority) == (None, "normal")


@pytest.mark.parametrize("argv", [["--memory-limit-mib", "0"], ["--stream-priority", "urgent"]])
def test_bad_values_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["llm", *argv])
    assert info.value.code == 2


def test_the_synthetic_server_has_no_such_flags() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["synthetic", "--memory-limit-mib", "10"])


CPU_REFUSALS = [
    (["llm", "--device", "cpu", "--memory-limit-mib", "512"],
     "python -m bench_plugin.servers llm: error: --memory-limit-mib needs a CUDA device; this server would run on cpu"),
    (["embedding", "--stream-priority", "high"],
     "python -m bench_plugin.servers embedding: error: --stream-priority high needs a CUDA device; this server would "
     "run on cpu"),
    (["asr", "--device", "cpu", "--stream-priority", "low"],
     "python -m bench_plugin.servers asr: error: --stream-priority low needs a CUDA device; this server would run on "
     "cpu"),
]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
@pytest.mark.parametrize(("argv", "message"), CPU_REFUSALS)
def test_on_a_cpu_only_host_the_flags_fail_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    out = capsys.readouterr()
    assert out.err.splitlines() == [message] and out.out == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_the_real_command_line_exits_2_with_that_line() -> None:
    argv, message = CPU_REFUSALS[0]
    result = subprocess.run([sys.executable, "-m", "bench_plugin.servers", *argv], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [message] and result.stdout == ""


def test_normal_priority_and_no_cap_are_fine_on_the_cpu() -> None:
    check_sharing_flags(torch.device("cpu"), None, "normal")
    assert make_model_stream(torch.device("cpu"), "normal") is None
