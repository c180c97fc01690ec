"""The ASR server: WAV upload, resampling, fixed-length transcripts, formats, validation."""

from __future__ import annotations

import io
import math
import wave

import pytest
from servers_testlib import ServerProcess, assert_openai_error, make_wav, post

TOKENS_PER_SECOND = 3
ENDPOINT = "/v1/audio/transcriptions"


def _transcribe(server: ServerProcess, wav: bytes, **fields: str) -> dict[str, object]:
    resp = post(server, ENDPOINT, files={"file": ("clip.wav", wav, "audio/wav")}, data=fields)
    assert resp.status_code == 200, resp.text
    result: dict[str, object] = resp.json()
    return result


@pytest.mark.parametrize(("seconds", "rate", "channels"), [(2.5, 8000, 2), (1.0, 16000, 1), (0.2, 44100, 2)])
def test_word_count_follows_duration(asr_server: ServerProcess, seconds: float, rate: int, channels: int) -> None:
    body = _transcribe(asr_server, make_wav(seconds, rate, channels), model="bench-asr-tiny")
    assert isinstance(body["text"], str)
    assert len(body["text"].split()) == math.ceil(seconds * TOKENS_PER_SECOND)
    assert body["usage"] == {"type": "duration", "seconds": pytest.approx(seconds, abs=1e-3)}


def test_same_audio_same_text(asr_server: ServerProcess) -> None:
    wav = make_wav(1.7)
    assert _transcribe(asr_server, wav)["text"] == _transcribe(asr_server, wav)["text"]


def test_response_formats(asr_server: ServerProcess) -> None:
    wav = make_wav(1.0)
    text = _transcribe(asr_server, wav)["text"]
    verbose = _transcribe(asr_server, wav, response_format="verbose_json")
    assert verbose["text"] == text and verbose["duration"] == pytest.approx(1.0)
    assert verbose["language"] == "english" and verbose["task"] == "transcribe"
    plain = post(asr_server, ENDPOINT, files={"file": ("a.wav", wav)}, data={"response_format": "text"})
    assert plain.headers["Content-Type"].startswith("text/plain") and plain.text == text


def _raw_wav(fmt_code: int) -> bytes:
    """A WAV whose fmt chunk declares ``fmt_code`` (3 = IEEE float), which PCM decoders reject."""
    good = make_wav(0.5, channels=1)
    return good[:20] + fmt_code.to_bytes(2, "little") + good[22:]


def _long_wav() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\0" * 8000 * 31)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("files", "data", "param", "needle"),
    [
        ({}, {"model": "bench-asr-tiny"}, "file", "required"),
        ({"file": ("a.txt", b"hello, not audio")}, {}, "file", "not a WAV"),
        ({"file": ("a.wav", b"")}, {}, "file", "empty"),
        ({"file": ("a.wav", b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk")}, {}, "file", "corrupt"),
        ({"file": ("a.wav", _raw_wav(3))}, {}, "file", "PCM"),
        ({"file": ("a.wav", _long_wav())}, {}, "file", "30 s"),
        ({"file": ("a.wav", make_wav(0.5))}, {"response_format": "srt"}, "response_format", "not supported"),
        ({"file": ("a.wav", make_wav(0.5))}, {"response_format": "xml"}, "response_format", "one of"),
        ({"file": ("a.wav", make_wav(0.5))}, {"temperature": "warm"}, "temperature", "number"),
    ],
)
def test_rejects(asr_server: ServerProcess, files: dict, data: dict, param: str, needle: str) -> None:
    if not files:  # still send multipart
        files = {"other": ("x", b"x")}
    err = assert_openai_error(post(asr_server, ENDPOINT, files=files, data=data), 400, param=param)
    assert needle in err["message"]


def test_rejects_file_as_text_field_and_non_multipart(asr_server: ServerProcess) -> None:
    resp = post(asr_server, ENDPOINT, files={"model": (None, "bench-asr-tiny"), "file": (None, "abc")})
    assert_openai_error(resp, 400, param="file")
    assert_openai_error(post(asr_server, ENDPOINT, {"file": "abc"}), 400)
