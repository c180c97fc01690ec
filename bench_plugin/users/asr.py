"""ASRUser: WAV clips to POST /v1/audio/transcriptions as multipart/form-data; a text must come back."""

from __future__ import annotations

import uuid
from typing import Any

from bench_plugin.samples import Sample
from bench_plugin.users.base import Prepared, RequestFailed, WorkloadUser, read_json
from bench_plugin.users.state import ClassLoad

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

    def prepare(self, load: ClassLoad, item: dict[str, Any]) -> Prepared:
        audio = self.state.request_sets["asr"].audio[item["file"]]
        fields = {"model": load.model, "response_format": "json", "language": item.get("language", "en")}
        body, content_type = multipart_body(fields, item["file"], audio)
        return Prepared(load.url.rstrip("/") + PATH, PATH, body, {"Content-Type": content_type},
                        sizes={"audio_s": float(item["audio_seconds"])})

    def read(self, raw: Any, load: ClassLoad, prepared: Prepared, sample: Sample) -> None:
        reply = read_json(raw, sample)
        if not isinstance(reply.get("text"), str):
            raise RequestFailed("reply has no 'text'", kind="protocol")
        sample.ok = True
