"""Command line: ``python -m bench_plugin.servers {llm,embedding,asr,synthetic} [options]``.

Parses and validates flags (bad flags: a clear message and exit status 2), then runs
one server until SIGTERM/SIGINT. Server modules are imported lazily so that the
``synthetic`` server never imports torch.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

from .api_audio import max_decode_tokens
from .device import service_ms_for
from .device_flags import cuda_only_refusal, device_spec_error
from .presets import ASR_PRESETS, DEFAULT_MODEL_NAMES, EMBEDDING_PRESETS, LLM_PRESETS

_DTYPE_CHOICES = ("float32", "bfloat16", "float16")
_STREAM_PRIORITIES = ("high", "normal", "low")
_MIN_MODEL_LEN = 16  # the warm-up prefills 8 tokens and decodes after them
# Embedding --max-batch-size default: inputs per step on CPU / on CUDA. On an H200, 32 inputs of
# ~160 tokens were ~10 ms of GPU work against about as much Python launch time, and the GPU
# was busy 38-43% of the time at saturation; on CUDA --max-batch-tokens closes batches instead.
EMBEDDING_MAX_BATCH = {"cpu": 32, "cuda": 256}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"must be 1-65535, got {value}")
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--model-name", default=None, help="served model name (default bench-<kind>-<size>)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights / slow-request choice (default 0)")


def _add_torch(p: argparse.ArgumentParser, sizes: list[str], max_batch: int | None, dynamic: bool) -> None:
    p.add_argument("--size", choices=sizes, default="tiny", help="model size preset (default tiny)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available, else cpu)")
    p.add_argument(
        "--dtype",
        choices=_DTYPE_CHOICES,
        default=None,
        help="weights/activations dtype (default bfloat16 on cuda, float32 on cpu)",
    )
    p.add_argument("--threads", type=_positive_int, default=None, help="torch CPU threads (torch.set_num_threads)")
    p.add_argument(
        "--memory-limit-mib",
        type=_positive_int,
        default=None,
        help="cap PyTorch's GPU allocator at N MiB (torch.cuda.set_per_process_memory_fraction; CUDA only; "
        "memory allocated outside PyTorch is not counted)",
    )
    p.add_argument(
        "--stream-priority",
        choices=_STREAM_PRIORITIES,
        default="normal",
        help="run the model on a CUDA stream of this priority (the ends of torch.cuda.Stream.priority_range()); "
        "it orders kernels against this process's other streams only, not against other processes (CUDA only)",
    )
    p.add_argument(
        "--max-batch-size",
        type=_positive_int,
        default=max_batch,
        help=f"most sequences per model step (default {max_batch})" if max_batch else
        "most inputs per model step (default 32 on CPU, 256 on CUDA)",
    )
    if dynamic:
        p.add_argument(
            "--max-wait-ms",
            type=_non_negative_float,
            default=5.0,
            help="dynamic batching window after the first queued input (default 5)",
        )


def _add_graphs(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--cuda-graphs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"replay {what} from CUDA graphs captured at warm-up (default: on for CUDA devices; CUDA only)",
    )


def _add_synthetic(syn: argparse.ArgumentParser) -> None:
    _add_common(syn)
    syn.add_argument("--ttft-ms", type=_non_negative_float, default=50.0, help="time to first token (default 50)")
    syn.add_argument("--itl-ms", type=_non_negative_float, default=10.0, help="delay between tokens (default 10)")
    syn.add_argument(
        "--latency-ms",
        type=_non_negative_float,
        default=50.0,
        help="total latency of embeddings and transcriptions (default 50)",
    )
    syn.add_argument("--slow-fraction", type=_fraction, default=0.0, help="share of slow requests (default 0)")
    syn.add_argument(
        "--slow-extra-ms",
        type=_non_negative_float,
        default=0.0,
        help="added to TTFT (llm) or latency (others) of slow requests (default 0)",
    )
    syn.add_argument(
        "--slow-by",
        choices=("sequence", "content"),
        default="sequence",
        help="what picks the slow requests: their sequence number, or their content (same request, same delay)",
    )
    syn.add_argument("--timing-log", default=None, help="JSON-lines file, one line per finished request")
    syn.add_argument(
        "--ready-after-s",
        type=_non_negative_float,
        default=0.0,
        help="answer 503 on /health this long after start (default 0)",
    )
    syn.add_argument(
        "--tokens-per-second", type=_positive_int, default=3, help="transcription words per second of audio (default 3)"
    )
    syn.add_argument("--embedding-dim", type=_positive_int, default=384, help="embedding size (default 384)")
    syn.add_argument(
        "--max-concurrency",
        type=int,
        default=0,
        help="requests served at once; later ones queue, so capacity is known (default 0: unlimited)",
    )
    syn.add_argument(
        "--shared-device",
        default=None,
        metavar="PATH",
        help="queue every request on the simulated device in file PATH, shared with the other synthetic servers "
        "given the same PATH (one FCFS queue, exponential service): the contention simulator (servers/device.py)",
    )
    syn.add_argument(
        "--service-ms",
        default="10",
        metavar="SPEC",
        help="with --shared-device: mean device time per request, ms; `10`, or per --service-key "
        "`time-slicing=14,light=8,10` (a bare number for every other key; default 10)",
    )
    syn.add_argument("--service-key", default=None, help="what picks --service-ms's time: the arm ({arm}), say")
    syn.add_argument(
        "--startup-device-ms",
        type=_non_negative_float,
        default=0.0,
        help="with --shared-device: hold the device this long when the server starts, as a cold start loading onto "
        "a GPU does: every co-tenant request arriving meanwhile waits until it ends (default 0)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The full CLI parser, one sub-command per server kind."""
    parser = argparse.ArgumentParser(prog="python -m bench_plugin.servers", description=__doc__)
    sub = parser.add_subparsers(dest="kind", required=True, metavar="{llm,embedding,asr,synthetic}")

    llm = sub.add_parser("llm", help="Llama-style decoder with continuous batching")
    _add_common(llm)
    _add_torch(llm, list(LLM_PRESETS), max_batch=32, dynamic=False)
    llm.add_argument(
        "--max-model-len",
        type=_positive_int,
        default=None,
        help="KV cache positions per sequence: prompt + max_tokens limit (default per size)",
    )
    _add_graphs(llm, "decode steps")

    emb = sub.add_parser("embedding", help="BERT-style encoder with dynamic batching")
    _add_common(emb)
    _add_torch(emb, list(EMBEDDING_PRESETS), max_batch=None, dynamic=True)
    emb.add_argument(
        "--max-batch-tokens",
        type=_positive_int,
        default=16384,
        help="most input tokens per model step; a batch closes at whichever limit it reaches first (default 16384)",
    )
    emb.add_argument(
        "--no-pipelining",
        action="store_true",
        help="on CUDA, finish each batch before launching the next (default: launch the next batch of what is "
        "queued while the last one is on the GPU)",
    )

    asr = sub.add_parser("asr", help="Whisper-style encoder-decoder with dynamic batching")
    _add_common(asr)
    _add_torch(asr, list(ASR_PRESETS), max_batch=8, dynamic=True)
    asr.add_argument(
        "--tokens-per-second", type=_positive_int, default=3, help="tokens decoded per second of audio (default 3)"
    )
    _add_graphs(asr, "decoder steps")

    _add_synthetic(sub.add_parser("synthetic", help="calibration server with known latencies (no torch)"))
    return parser


def _validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Cross-flag checks argparse cannot express; exits 2 with a message on failure."""
    if args.model_name is None:
        args.model_name = DEFAULT_MODEL_NAMES[args.kind].format(size=getattr(args, "size", ""))
    if args.kind == "synthetic":
        if args.shared_device is not None:
            try:
                args.service_s = service_ms_for(args.service_ms, args.service_key) / 1000.0
            except ValueError as exc:
                parser.error(str(exc))
        elif args.startup_device_ms > 0:
            parser.error("--startup-device-ms needs --shared-device: there is no device to hold")
        return
    size: str = args.size
    if args.kind == "llm" and args.max_model_len is not None:
        limit = LLM_PRESETS[size].max_position
        if not _MIN_MODEL_LEN <= args.max_model_len <= limit:
            parser.error(f"--max-model-len must be between {_MIN_MODEL_LEN} and {limit} for size {size}")
    if args.kind == "asr":
        needed = max_decode_tokens(args.tokens_per_second)
        if needed > ASR_PRESETS[size].n_text_ctx:
            parser.error(
                f"--tokens-per-second {args.tokens_per_second} needs {needed} decoder positions for "
                f"30 s of audio; the model has {ASR_PRESETS[size].n_text_ctx}"
            )
    if args.device is not None and (error := device_spec_error(args.device)):
        parser.error(error)
    cuda_graphs = bool(getattr(args, "cuda_graphs", None))
    if args.device == "cpu":  # decided from the flags alone: no torch import (seconds) to refuse or go on
        _refuse(parser, args, cuda_only_refusal("cpu", args.memory_limit_mib, args.stream_priority, cuda_graphs))
        if args.max_batch_size is None:
            args.max_batch_size = EMBEDDING_MAX_BATCH["cpu"]
        return
    from .torch_common import check_sharing_flags, resolve_device, resolve_dtype  # torch only for model servers

    try:
        device = resolve_device(args.device)
        resolve_dtype(args.dtype, device)
    except ValueError as exc:
        parser.error(str(exc))
    if args.max_batch_size is None:
        args.max_batch_size = EMBEDDING_MAX_BATCH[device.type]
    if device.type != "cuda":
        _refuse(parser, args, cuda_only_refusal(str(device), args.memory_limit_mib, args.stream_priority, cuda_graphs))
    try:
        check_sharing_flags(device, args.memory_limit_mib, args.stream_priority)
    except ValueError as exc:
        _refuse(parser, args, str(exc))


def _refuse(parser: argparse.ArgumentParser, args: argparse.Namespace, why: str | None) -> None:
    """Exit 2 with ``why`` on one line, no usage text (the flags parsed fine; this host cannot honour them)."""
    if why:
        parser.exit(2, f"{parser.prog} {args.kind}: error: {why}\n")


def passive_cpu_threads() -> None:
    """Let torch's OpenMP threads sleep, not spin, between parallel regions (unless the caller set a policy).

    By default (OMP_WAIT_POLICY unset) libgomp's worker threads spin for a while after each parallel
    region, waiting for the next. Servers that share cores (the time-slicing arm on a CPU host) then
    burn them on each other's behalf, and the load generator beside them waits for a core: on the
    project's 2-core machine three tiny-model servers at llm 2 / embedding 10 / asr 2 req/s kept 1.2
    cores busy, where they need 0.2 (docs/benchmarks.md, "Send lag on the project's 2-core machine").
    libgomp reads the variable when torch loads it, so this runs before that.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main(argv: list[str] | None = None) -> int:
    """Parse flags and run the chosen server; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _validate(parser, args)
    passive_cpu_threads()
    module = importlib.import_module(f"{__package__}.{args.kind}")
    code: int = module.run(args)
    return code


def ensure_unpatched_runtime() -> None:
    """Refuse to serve under gevent's monkey-patching (it would come from importing Locust).

    Patched threading turns the engine threads into greenlets that block the event loop during
    every model step, which would distort every latency measured. ``bench_plugin/__init__.py``
    imports nothing eagerly, so this only trips if that ever changes.
    """
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        sys.exit("bench-server error: gevent monkey-patching is active; the server must not import Locust")


if __name__ == "__main__":
    ensure_unpatched_runtime()
    exit_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Engine threads are daemons that may be mid-forward; skip interpreter teardown so
    # shutdown is prompt and cannot trip over a half-finished torch call.
    os._exit(exit_code)
