"""OpenAI ``/v1/audio/transcriptions`` protocol: multipart parsing and response formats.

Shared by the ASR and synthetic servers; torch-free. The transcript length is fixed
by the audio length (``ceil(seconds * tokens_per_second)`` words, at least one) so
the work per request, and the output a client can count, is deterministic.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_request import FileField

from .app import ApiError, ServerState
from .audio import AudioError, DecodedAudio, load_audio
from .presets import SOT_SEQUENCE

RESPONSE_FORMATS = ("json", "text", "verbose_json")
UNSUPPORTED_FORMATS = ("srt", "vtt")
Form = dict[str, Any]  # field name -> str or FileField


@dataclass(frozen=True)
class TranscriptionRequest:
    """A validated transcription request with its decoded audio."""

    audio: DecodedAudio
    response_format: str
    language: str


def tokens_for_duration(seconds: float, tokens_per_second: int) -> int:
    """Tokens decoded for ``seconds`` of audio (the epsilon absorbs float noise)."""
    return max(1, math.ceil(seconds * tokens_per_second - 1e-9))


def max_decode_tokens(tokens_per_second: int, max_seconds: float = 30.0) -> int:
    """Decoder positions needed for the longest accepted audio (prompt included)."""
    return tokens_for_duration(max_seconds, tokens_per_second) + len(SOT_SEQUENCE)


def _text_field(form: Form, name: str) -> str | None:
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(f"'{name}' must be a text field", param=name)
    return value


async def read_form(request: web.Request) -> Form:
    """The multipart form of a transcription request (the upload is read in full)."""
    if request.content_type != "multipart/form-data":
        raise ApiError(f"expected multipart/form-data, got {request.content_type or 'no content type'}")
    try:
        return dict(await request.post())
    except ValueError as exc:
        raise ApiError(f"malformed multipart body: {exc}") from None


async def parse_form(form: Form, state: ServerState) -> TranscriptionRequest:
    """Check model and options, and decode the uploaded WAV file."""
    state.check_model({"model": _text_field(form, "model")})
    fmt = _text_field(form, "response_format") or "json"
    if fmt in UNSUPPORTED_FORMATS:
        raise ApiError(
            f"response_format '{fmt}' is not supported", param="response_format", code="unsupported_parameter"
        )
    if fmt not in RESPONSE_FORMATS:
        raise ApiError(f"response_format must be one of {list(RESPONSE_FORMATS)}", param="response_format")
    temperature = _text_field(form, "temperature")
    if temperature is not None:
        try:
            float(temperature)
        except ValueError:
            raise ApiError("'temperature' must be a number", param="temperature") from None
    upload = form.get("file")
    if upload is None:
        raise ApiError("'file' is required", param="file")
    if not isinstance(upload, FileField):
        raise ApiError("'file' must be an uploaded file, not a text field", param="file")
    data = upload.file.read()
    try:
        # Decoding + resampling 30 s is a few ms of numpy: keep it off the event loop.
        audio = await asyncio.to_thread(load_audio, data)
    except AudioError as exc:
        raise ApiError(f"invalid audio file: {exc}", param="file") from None
    return TranscriptionRequest(audio, fmt, _text_field(form, "language") or "english")


def transcription_response(req: TranscriptionRequest, text: str) -> web.Response:
    """The reply in the requested format (json, text or verbose_json)."""
    seconds = round(req.audio.duration_s, 3)
    usage = {"type": "duration", "seconds": seconds}
    if req.response_format == "text":
        return web.Response(text=text, content_type="text/plain")
    if req.response_format == "verbose_json":
        return web.json_response(
            {
                "task": "transcribe",
                "language": req.language,
                "duration": seconds,
                "text": text,
                "segments": [],
                "usage": usage,
            }
        )
    return web.json_response({"text": text, "usage": usage})
