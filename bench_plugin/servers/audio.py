"""WAV decoding and resampling for transcription requests (numpy only, no torch).

Accepts RIFF/WAVE PCM integer files (8/16/24/32-bit, any sample rate, any channel
count) through the stdlib ``wave`` module, mixes to mono and resamples to 16 kHz.
Every problem is raised as :class:`AudioError` with a message fit for a 400 reply.
"""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass

import numpy as np

TARGET_RATE = 16000
MAX_SECONDS = 30.0


class AudioError(ValueError):
    """The uploaded file is not audio this server can decode."""


@dataclass(frozen=True)
class DecodedAudio:
    """Mono float32 samples at 16 kHz in [-1, 1], plus the original duration."""

    samples: np.ndarray
    duration_s: float


def _pcm_to_float(frames: bytes, width: int) -> np.ndarray:
    if width == 1:  # 8-bit WAV is unsigned
        return (np.frombuffer(frames, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 2:
        return np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    if width == 3:  # 24-bit: widen each little-endian triple to int32
        raw = np.frombuffer(frames, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        ints = np.where(ints >= 1 << 23, ints - (1 << 24), ints)
        return ints.astype(np.float32) / float(1 << 23)
    if width == 4:
        return np.frombuffer(frames, dtype="<i4").astype(np.float32) / 2147483648.0
    raise AudioError(f"unsupported WAV sample width: {width * 8} bits")


def decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the sample rate of a PCM WAV file."""
    if not data:
        raise AudioError("the uploaded file is empty")
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError("the uploaded file is not a WAV file (no RIFF/WAVE header); only PCM WAV is supported")
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            channels, width, rate = wav.getnchannels(), wav.getsampwidth(), wav.getframerate()
            frames = wav.readframes(wav.getnframes())
    except (wave.Error, EOFError, ValueError, RuntimeError, struct.error) as exc:
        # The stdlib chunk parser reports malformed files through all of these.
        detail = str(exc) or type(exc).__name__
        raise AudioError(
            f"corrupt or unsupported WAV file (only PCM integer samples are supported): {detail}"
        ) from None
    if channels < 1 or rate < 1:
        raise AudioError(f"invalid WAV header: {channels} channels at {rate} Hz")
    usable = len(frames) - len(frames) % (channels * width)
    if usable == 0:
        raise AudioError("the WAV file contains no audio samples")
    samples = _pcm_to_float(frames[:usable], width).reshape(-1, channels).mean(axis=1)
    return samples.astype(np.float32), rate


def resample(samples: np.ndarray, rate: int, target: int = TARGET_RATE) -> np.ndarray:
    """Linear-interpolation resampling: cheap, and plenty for a random-weight model."""
    if rate == target:
        return samples
    n_out = max(1, round(len(samples) * target / rate))
    positions = np.arange(n_out, dtype=np.float64) * (rate / target)
    return np.interp(positions, np.arange(len(samples)), samples).astype(np.float32)


def load_audio(data: bytes, max_seconds: float = MAX_SECONDS) -> DecodedAudio:
    """Decode, check the length limit, mix to mono and resample to 16 kHz."""
    samples, rate = decode_wav(data)
    duration = len(samples) / rate
    if duration > max_seconds:
        raise AudioError(f"audio is {duration:.2f} s long; at most {max_seconds:g} s is supported")
    return DecodedAudio(resample(samples, rate), duration)
