"""Fixed request sets: the same inputs, in the same order, for every arm and every repeat.

Each workload class has one request set, generated from a seed or read from files, and hashed
(sha256 over a canonical form) so every result names exactly what was sent. Prompts are words of a
fixed pseudo-word vocabulary: a word-level tokenizer (the reference servers') counts one token per
word, and subword tokenizers count a stable multiple of it.
"""

from __future__ import annotations

import hashlib
import json
import random
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_plugin.scenario import (
    ASRClass,
    EmbeddingClass,
    LLMClass,
    Scenario,
    ScenarioError,
)

PACKAGED_CLIPS = Path(__file__).parent.parent / "data" / "asr"
"""Speech clips shipped with the package (see make_clips.sh there)."""

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


RequestItem = dict[str, Any]
"""One request of a set as its JSONL line holds it (``prompt``, ``input``, ``file``, ``max_tokens``, ...): the
JSON that the class's user turns into a request body, as the user wrote it or the generator made it."""


class RequestSetError(ScenarioError):
    """A request set that cannot be built or read; the message names the file."""


@dataclass(frozen=True)
class RequestSet:
    """One class's fixed inputs: ``items`` are replayed by index, ``sha256`` identifies them."""

    workload: str
    items: list[RequestItem]
    sha256: str
    source: str
    """Where the items came from: ``generated(seed=...)`` or a path."""
    audio: dict[str, bytes] = field(default_factory=dict, repr=False)
    """For ASR: clip name -> WAV bytes."""

    def __len__(self) -> int:
        return len(self.items)

    def to_message(self) -> dict[str, Any]:
        """The whole set (items and clips) as a message payload, for a worker that has no files."""
        return {"workload": self.workload, "items": self.items, "sha256": self.sha256, "source": self.source,
                "audio": self.audio}

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> RequestSet:
        """The inverse of to_message; RequestSetError if what arrived does not hash to what was sent."""
        items, workload = list(data["items"]), str(data["workload"])
        sha = _hash_items(items)
        if sha != data["sha256"]:
            raise RequestSetError(f"{workload} request set arrived altered: sha256 {sha[:12]} vs {data['sha256'][:12]}")
        audio = {str(name): bytes(clip) for name, clip in (data.get("audio") or {}).items()}
        for item in items:
            if "file" in item and hashlib.sha256(audio.get(item["file"], b"")).hexdigest() != item.get("sha256"):
                raise RequestSetError(f"{workload} request set arrived altered: clip {item['file']} does not match "
                                      "its sha256")
        return cls(workload, items, sha, str(data["source"]), audio)


def vocabulary(size: int = 4096, seed: int = 19) -> list[str]:
    """A fixed list of distinct pronounceable pseudo-words."""
    rng = random.Random(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _text(rng: random.Random, words: list[str], n_tokens: int) -> str:
    return " ".join(rng.choice(words) for _ in range(n_tokens))


def _hash_items(items: list[RequestItem]) -> str:
    canonical = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


MAX_REQUEST_SET_BYTES = 256 * 1024 * 1024
"""A request-set file is read whole into memory, in every load-generating process."""


def _read_text(path: Path) -> str:
    """The file's text; RequestSetError, in one line, where it is missing, not a file, too large or unreadable."""
    if not path.exists():
        raise RequestSetError(f"{path}: request-set file not found")
    if not path.is_file():  # a directory, /dev/zero, a pipe: nothing to read whole
        raise RequestSetError(f"{path}: not a regular file (a request set is a JSON-lines file)")
    size = path.stat().st_size
    if size > MAX_REQUEST_SET_BYTES:
        raise RequestSetError(f"{path}: {size / 2**20:,.0f} MiB; a request set is read whole into every load "
                              f"generator's memory: at most {MAX_REQUEST_SET_BYTES // 2**20} MiB")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise RequestSetError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise RequestSetError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _read_jsonl(path: Path, key: str) -> list[RequestItem]:
    items = []
    for lineno, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RequestSetError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
        if not isinstance(item, dict) or key not in item:
            raise RequestSetError(f"{path}:{lineno}: each line must be an object with a {key!r} key")
        items.append(item)
    if not items:
        raise RequestSetError(f"{path}: request-set file has no requests")
    return items


def llm_requests(spec: LLMClass, base: Path) -> RequestSet:
    """Prompts of the given input-token lengths (cycled), each with a fixed output length."""
    req = spec.requests
    if req.file:
        path = (base / req.file).resolve()
        items = _read_jsonl(path, "prompt")
        for item in items:
            item.setdefault("output_tokens", req.output_tokens)
            item.setdefault("input_tokens", len(str(item["prompt"]).split()))
        return RequestSet("llm", items, _hash_items(items), str(path))
    rng = random.Random(req.seed)
    words = vocabulary()
    items = []
    for i in range(req.count):
        n_in = req.input_tokens[i % len(req.input_tokens)]
        items.append({"prompt": _text(rng, words, n_in), "input_tokens": n_in, "output_tokens": req.output_tokens})
    return RequestSet("llm", items, _hash_items(items), f"generated(seed={req.seed})")


def embedding_requests(spec: EmbeddingClass, base: Path) -> RequestSet:
    """Batches of texts of the given token lengths."""
    req = spec.requests
    if req.file:
        path = (base / req.file).resolve()
        items = _read_jsonl(path, "input")
        for item in items:
            if isinstance(item["input"], str):
                item["input"] = [item["input"]]
        return RequestSet("embedding", items, _hash_items(items), str(path))
    rng = random.Random(req.seed)
    words = vocabulary()
    items = []
    for i in range(req.count):
        n_in = req.input_tokens[i % len(req.input_tokens)]
        items.append({"input": [_text(rng, words, n_in) for _ in range(req.batch_size)], "input_tokens": n_in})
    return RequestSet("embedding", items, _hash_items(items), f"generated(seed={req.seed})")


def asr_requests(spec: ASRClass, base: Path) -> RequestSet:
    """Every WAV clip in the clips directory, sorted by name (optionally the first ``count``)."""
    req = spec.requests
    directory = (base / req.clips).resolve() if req.clips else PACKAGED_CLIPS
    if not directory.is_dir():
        raise RequestSetError(f"{directory}: ASR clips directory not found (requests.clips: {req.clips!r})")
    paths = sorted(directory.glob("*.wav"))
    if req.count is not None:
        paths = paths[: req.count]
    if not paths:
        raise RequestSetError(f"{directory}: no .wav clips in the ASR clips directory")
    items, audio = [], {}
    for path in paths:
        data = path.read_bytes()
        try:
            with wave.open(str(path)) as wav:
                seconds = wav.getnframes() / wav.getframerate()
        except (wave.Error, EOFError) as exc:
            raise RequestSetError(f"{path}: not a readable WAV file: {exc}") from None
        audio[path.name] = data
        items.append({
            "file": path.name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "audio_seconds": round(seconds, 4),
            "language": req.language,
        })
    return RequestSet("asr", items, _hash_items(items), str(directory), audio)


def build_request_sets(scenario: Scenario, base: Path) -> dict[str, RequestSet]:
    """The request set of every class in the scenario; ``base`` is the scenario file's directory."""
    builders = {"llm": llm_requests, "embedding": embedding_requests, "asr": asr_requests}
    return {name: builders[name](scenario.classes.get(name), base) for name in scenario.classes.names()}  # type: ignore[operator]


def store_request_sets(sets: dict[str, RequestSet], directory: Path) -> None:
    """Write each set's items (and its hash) under ``directory`` so a result can be replayed later."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, request_set in sets.items():
        with open(directory / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for item in request_set.items:
                fh.write(json.dumps(item, ensure_ascii=False) + "\n")
        (directory / f"{name}.sha256").write_text(request_set.sha256 + "\n")
