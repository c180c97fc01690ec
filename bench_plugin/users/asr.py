"""ASRUser: WAV clips to POST /v1/audio/transcriptions as multipart/form-data; a text must come back.

The reply is read in the ``response_format`` the class asks for, as OpenAI's API defines them and
``transformers serve``, vLLM and the whisper servers send them: ``json`` is ``{"text": str}``, ``text``
the transcript as the body itself, ``verbose_json`` ``{"text": str, "segments": [...], ...}`` (where
``segments``, if sent, is a list of objects with a ``text``), decoded in one typed pass (users/shapes.py). A
reply that breaks it is a ``protocol`` error naming the field.
"""

from __future__ import annotations

import uuid
from typing import Any

from bench_plugin.loadgen.state import ClassLoad
from bench_plugin.results.samples import Sample
from bench_plugin.scenario.request_sets import RequestItem
from bench_plugin.users.base import Prepared, RequestFailed, WorkloadUser, read_body
from bench_plugin.users.shapes import ShapeError, decode_transcription

PATH = "/v1/audio/transcriptions"


def multipart_body(fields: dict[str, str], filename: str, audio: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body with text ``fields`` and one ``file`` part; returns (body, content type)."""
    boundary = f"bench-{uuid.uuid4().hex}"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: audio/wav\r\n\r\n".encode()
        + audio
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class ASRUser(WorkloadUser):
    """Drives the asr class."""

    workload = "asr"

    def prepare(self, load: ClassLoad, item: RequestItem) -> Prepared:
        audio = self.state.request_sets["asr"].audio[item["file"]]
        fields = {"model": load.model, "response_format": load.options.get("response_format", "json"),
                  "language": item.get("language", "en")}
        body, content_type = multipart_body(fields, item["file"], audio)
        return Prepared(load.url.rstrip("/") + PATH, PATH, body, {"Content-Type": content_type},
                        sizes={"audio_s": float(item["audio_seconds"])})

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        form = load.options.get("response_format", "json")
        if form == "text":
            body = read_body(raw, sample)
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                raise RequestFailed(f"text reply is not UTF-8: {body[:80]!r}", kind="protocol") from None
        else:
            try:
                decode_transcription(read_body(raw, sample))
            except ShapeError as exc:
                raise RequestFailed(f"{form} {exc}", kind="protocol") from None
        sample.ok = True
