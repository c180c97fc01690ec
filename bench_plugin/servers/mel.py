"""Whisper-style log-mel spectrogram in torch (16 kHz, n_fft 400, hop 160).

The Slaney-scale, Slaney-normalised mel filterbank (librosa's default, which Whisper
uses) is built in code, so no precomputed filter files are needed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160

_F_SP = 200.0 / 3.0  # Slaney scale: linear below 1 kHz ...
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = math.log(6.4) / 27.0  # ... logarithmic above


def hz_to_mel(hz: Tensor) -> Tensor:
    """Slaney mel scale."""
    log_part = _MIN_LOG_MEL + torch.log(torch.clamp(hz, min=_MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOGSTEP
    return torch.where(hz < _MIN_LOG_HZ, hz / _F_SP, log_part)


def mel_to_hz(mel: Tensor) -> Tensor:
    """Inverse of :func:`hz_to_mel`."""
    log_part = _MIN_LOG_HZ * torch.exp(_LOGSTEP * (mel - _MIN_LOG_MEL))
    return torch.where(mel < _MIN_LOG_MEL, mel * _F_SP, log_part)


def mel_filterbank(n_mels: int, n_fft: int = N_FFT, sample_rate: int = SAMPLE_RATE) -> Tensor:
    """Triangular filters ``[n_mels, n_fft // 2 + 1]`` (float32, CPU)."""
    fft_freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    mel_points = torch.linspace(0.0, float(hz_to_mel(torch.tensor(sample_rate / 2.0))), n_mels + 2)
    hz_points = mel_to_hz(mel_points.to(torch.float64))
    widths = hz_points[1:] - hz_points[:-1]
    ramps = hz_points.view(-1, 1) - fft_freqs.view(1, -1)
    lower = -ramps[:-2] / widths[:-1].view(-1, 1)
    upper = ramps[2:] / widths[1:].view(-1, 1)
    weights = torch.clamp(torch.minimum(lower, upper), min=0.0)
    # Slaney normalisation: each filter has unit area.
    weights *= (2.0 / (hz_points[2:] - hz_points[:-2])).view(-1, 1)
    return weights.to(torch.float32)


class LogMel:
    """Computes normalised log-mel features on one device (cached window/filters)."""

    def __init__(self, n_mels: int, device: torch.device) -> None:
        self.n_mels = n_mels
        self.window = torch.hann_window(N_FFT, device=device, dtype=torch.float32)
        self.filters = mel_filterbank(n_mels).to(device)

    def __call__(self, audio: Tensor) -> Tensor:
        """1-D float32 16 kHz samples -> ``[n_mels, len // 160]`` features (at least 1 frame)."""
        if audio.numel() < N_FFT:  # reflect padding in the centred STFT needs a minimum length
            audio = torch.nn.functional.pad(audio, (0, N_FFT - audio.numel()))
        stft = torch.stft(audio, N_FFT, HOP_LENGTH, window=self.window, return_complex=True)
        power = stft[..., :-1].abs() ** 2
        log_spec = torch.clamp(self.filters @ power, min=1e-10).log10()
        log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
        return (log_spec + 4.0) / 4.0


def n_frames(n_samples: int) -> int:
    """Number of feature frames :class:`LogMel` returns for ``n_samples`` samples."""
    return max(n_samples, N_FFT) // HOP_LENGTH
