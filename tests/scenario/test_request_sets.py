"""Request sets: fixed, hashed, replayable; files read with errors that name the file and line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from bench_plugin.scenario import load_scenario
from bench_plugin.scenario.request_sets import PACKAGED_CLIPS, RequestSetError, build_request_sets, store_request_sets

ROOT = Path(__file__).resolve().parents[2]


def scenario_with(tmp_path: Path, classes: dict[str, object]) -> Path:
    data = {"name": "t", "classes": classes, "arms": [{"name": "a", "control": True}],
            "stages": [{"duration_s": 1, "load": {name: 1 for name in classes}}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_generated_sets_are_deterministic_and_sized() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "day19.yaml")
    a = build_request_sets(scenario, ROOT / "scenarios")
    b = build_request_sets(scenario, ROOT / "scenarios")
    assert {k: v.sha256 for k, v in a.items()} == {k: v.sha256 for k, v in b.items()}
    llm = a["llm"].items
    assert len(llm) == 64 and [len(i["prompt"].split()) for i in llm[:4]] == [32, 128, 32, 128]
    assert all(i["output_tokens"] == 32 for i in llm)
    assert all(len(i["input"]) == 8 for i in a["embedding"].items)


def test_asr_clips_are_real_wav_speech_with_durations() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "day19.yaml")
    asr = build_request_sets(scenario, ROOT / "scenarios")["asr"]
    assert len(asr) == len(list(PACKAGED_CLIPS.glob("*.wav"))) >= 8
    assert all(1.0 < item["audio_seconds"] < 30.0 for item in asr.items)
    assert all(asr.audio[item["file"]][:4] == b"RIFF" for item in asr.items)


def test_a_changed_input_changes_the_hash(tmp_path: Path) -> None:
    base = {"model": "m", "slo": {"p95_ms": 1}, "requests": {"count": 4, "seed": 1}}
    one = build_request_sets(load_scenario(scenario_with(tmp_path, {"llm": base})), tmp_path)["llm"].sha256
    base["requests"]["seed"] = 2
    two = build_request_sets(load_scenario(scenario_with(tmp_path, {"llm": base})), tmp_path)["llm"].sha256
    assert one != two


def test_prompt_file_is_read_and_stored(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "one two three"}\n\n{"prompt": "four", "output_tokens": 3}\n')
    classes = {"llm": {"model": "m", "slo": {"p95_ms": 1}, "requests": {"file": "p.jsonl", "output_tokens": 9}}}
    sets = build_request_sets(load_scenario(scenario_with(tmp_path, classes)), tmp_path)
    items = sets["llm"].items
    assert [(i["input_tokens"], i["output_tokens"]) for i in items] == [(3, 9), (1, 3)]
    store_request_sets(sets, tmp_path / "out")
    stored = [json.loads(line) for line in (tmp_path / "out" / "llm.jsonl").read_text().splitlines()]
    assert stored == items
    assert (tmp_path / "out" / "llm.sha256").read_text().strip() == sets["llm"].sha256


@pytest.mark.parametrize(("content", "message"), [
    ("{not json}\n", "p.jsonl:1: not valid JSON"),
    ('{"text": "x"}\n', "p.jsonl:1: each line must be an object with a 'prompt' key"),
    ("\n", "p.jsonl: request-set file has no requests"),
])
def test_bad_prompt_file(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "p.jsonl").write_text(content)
    classes = {"llm": {"model": "m", "slo": {"p95_ms": 1}, "requests": {"file": "p.jsonl"}}}
    with pytest.raises(RequestSetError, match=re.escape(message)):
        build_request_sets(load_scenario(scenario_with(tmp_path, classes)), tmp_path)


def test_bad_clip_directory(tmp_path: Path) -> None:
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "x.wav").write_bytes(b"not a wav")
    classes = {"asr": {"model": "m", "slo": {"p95_ms": 1}, "requests": {"clips": "clips"}}}
    with pytest.raises(RequestSetError, match=r"x\.wav: not a readable WAV file"):
        build_request_sets(load_scenario(scenario_with(tmp_path, classes)), tmp_path)
    (tmp_path / "clips" / "x.wav").unlink()
    with pytest.raises(RequestSetError, match=r"no \.wav clips"):
        build_request_sets(load_scenario(scenario_with(tmp_path, classes)), tmp_path)


@pytest.mark.parametrize(("where", "message"), [
    ("missing.jsonl", "missing.jsonl: request-set file not found"),
    ("/dev/zero", "/dev/zero: not a regular file (a request set is a JSON-lines file)"),
    ("a-directory", "a-directory: not a regular file"),
    ("latin1.jsonl", "latin1.jsonl:2: not UTF-8 text (invalid continuation byte)"),
    ("huge.jsonl", "huge.jsonl: 257 MiB; a request set is read whole into every load generator's memory: at most "
                   "256 MiB"),
])
def test_a_request_file_that_cannot_be_read_whole_says_why(tmp_path: Path, where: str, message: str) -> None:
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "one"}\n{"prompt": "caf\xe9"}\n')
    with open(tmp_path / "huge.jsonl", "wb") as huge:  # sparse: no disk taken
        huge.truncate(257 * 2**20)
    classes = {"llm": {"model": "m", "slo": {"p95_ms": 1}, "requests": {"file": where}}}
    with pytest.raises(RequestSetError, match=re.escape(message)):
        build_request_sets(load_scenario(scenario_with(tmp_path, classes)), tmp_path)
