"""The PromQL the plugin sends, compared with golden files, and the label matching that mirrors it.

Each case in CASES writes one golden file under golden/: its targets, then the range query of each
stage metric, one per line. A change to a query shows as a diff of those files in review. To
rewrite them after a deliberate change, run with BENCH_REGENERATE_GOLDEN=1 and read the diff:

    BENCH_REGENERATE_GOLDEN=1 python -m pytest tests/telemetry/test_promql.py

test_prometheus.py sends every golden query to a real Prometheus, which must accept it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench_plugin.results.telemetry_rows import DeviceInfo
from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.promql import (
    CHECK_QUERY,
    STAGE_METRICS,
    range_query,
    selects,
    stage_queries,
    target_label_sets,
    target_selects,
)
from bench_plugin.telemetry.stage_series import ClassTarget

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = os.environ.get("BENCH_REGENERATE_GOLDEN") == "1"

G0 = "GPU-c7f5d2c5-3e7c-2881-b1b9-66fc489b02e7"
G1 = "GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789"
MIG = "MIG-11111111-2222-5333-8444-555555555555"

CASES: dict[str, tuple[str, list[ClassTarget]]] = {
    "whole-gpu": ("a class alone on a whole GPU of this host (local backend)",
                  [ClassTarget("llm", device="cuda:0", gpu_uuid=G0)]),
    "mig-instance": ("a class on a MIG instance: the parent's UUID and the GPU instance id",
                     [ClassTarget("asr", device=MIG, gpu_uuid=G1, gpu_instance_id=1)]),
    "gpu-index": ("a class on cuda:1 with no UUID known: the gpu label (unique on one host only)",
                  [ClassTarget("llm", device="cuda:1")]),
    "pod": ("a class in a pod (Kubernetes): pod labels in the three spellings",
            [ClassTarget("embedding", pod="embedding-0", namespace="bench")]),
    "pod-on-gpu": ("a pod on a known GPU shared with other pods (time-slicing)",
                   [ClassTarget("llm", device="cuda:0", gpu_uuid=G0, pod="llm-0", namespace="bench")]),
    "shared-stage": ("one stage of a shared arm: llm and embedding pods on GPU 0, asr on a MIG instance of GPU 1", [
        ClassTarget("llm", device="cuda:0", gpu_uuid=G0, pod="llm-0", namespace="bench"),
        ClassTarget("embedding", device="cuda:0", gpu_uuid=G0, pod="embedding-0", namespace="bench"),
        ClassTarget("asr", device=MIG, gpu_uuid=G1, gpu_instance_id=1, pod="asr-0", namespace="bench"),
    ]),
    "escaping": ("label values with a quote, a backslash and a newline are escaped",
                 [ClassTarget("llm", gpu_uuid='GPU-"odd"\\path\nline', pod="p", namespace="n")]),
}


def golden_text(description: str, targets: list[ClassTarget]) -> str:
    lines = [f"# {description}"] + [f"# target: {t!r}" for t in targets]
    lines += list(stage_queries(targets).values())
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_stage_queries_match_their_golden_file(case: str) -> None:
    path = GOLDEN / f"{case}.promql"
    text = golden_text(*CASES[case])
    if REGENERATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {path.name}: run with BENCH_REGENERATE_GOLDEN=1 and review it"
    assert path.read_text(encoding="utf-8") == text, f"{path.name} differs: rerun with BENCH_REGENERATE_GOLDEN=1 " \
                                                     "if the change is meant, and review the diff"


def test_no_golden_file_is_left_without_a_case() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.promql")) == sorted(CASES)


def test_every_stage_metric_is_queried_in_order() -> None:
    queries = stage_queries([ClassTarget("llm", device="cuda:0")])
    assert list(queries) == list(STAGE_METRICS) == [
        F.GPU_UTIL, F.FB_USED, F.FB_FREE, F.PROF_GR_ENGINE_ACTIVE, F.PROF_SM_ACTIVE, F.PROF_DRAM_ACTIVE, F.POWER_USAGE]
    assert all(q.startswith(f"{m}{{") for m, q in queries.items())


def test_identical_label_sets_are_written_once() -> None:
    two = [ClassTarget("llm", device="cuda:0", gpu_uuid=G0), ClassTarget("embedding", device="cuda:0", gpu_uuid=G0)]
    assert range_query(F.GPU_UTIL, two) == range_query(F.GPU_UTIL, two[:1])
    assert range_query(F.GPU_UTIL, [ClassTarget("llm", device="cuda:3")]) == 'DCGM_FI_DEV_GPU_UTIL{gpu="3",GPU_I_ID=""}'


def test_a_query_without_targets_is_refused() -> None:
    with pytest.raises(ValueError, match="no target"):
        range_query(F.GPU_UTIL, [])


def test_selects_follows_promql_equality_and_empty_matchers() -> None:
    assert selects({"UUID": G0, "gpu": "0"}, {"UUID": G0, "GPU_I_ID": ""})
    assert not selects({"UUID": G0, "GPU_I_ID": "1"}, {"UUID": G0, "GPU_I_ID": ""})
    assert selects({"UUID": G0, "GPU_I_ID": ""}, {"UUID": G0, "GPU_I_ID": ""})  # empty is absent in PromQL
    assert not selects({"uuid": G0}, {"UUID": G0})


def test_target_selects_each_label_spelling_and_nothing_else() -> None:
    target = ClassTarget("llm", gpu_uuid=G0, pod="llm-0", namespace="bench")
    common = {"gpu": "0", "device": "nvidia0"}
    assert target_selects(target, {**common, "UUID": G0, "pod": "llm-0", "namespace": "bench"})
    assert target_selects(target, {**common, "UUID": G0, "exported_pod": "llm-0", "exported_namespace": "bench",
                                   "pod": "dcgm-exporter-x", "namespace": "gpu-operator"})
    assert target_selects(target, {**common, "uuid": G0, "pod_name": "llm-0", "pod_namespace": "bench"})
    assert not target_selects(target, {**common, "UUID": G0, "pod": "llm-0", "namespace": "other"})
    assert not target_selects(target, {**common, "UUID": G1, "pod": "llm-0", "namespace": "bench"})
    assert not target_selects(target, {**common, "UUID": G0, "GPU_I_ID": "1", "pod": "llm-0", "namespace": "bench"})
    assert len(target_label_sets(target)) == 3


def test_check_query_is_promql_of_its_own() -> None:
    assert CHECK_QUERY == "vector(1)"


def test_class_targets_refuse_what_selects_nothing_or_everything() -> None:
    with pytest.raises(ValueError, match="both pod and namespace"):
        ClassTarget("llm", pod="llm-0")
    with pytest.raises(ValueError, match="GPU instance id needs"):
        ClassTarget("asr", device=MIG, gpu_instance_id=1)
    with pytest.raises(ValueError, match="give a pod, a GPU UUID or a cuda:N device"):
        ClassTarget("asr", device=MIG)
    with pytest.raises(ValueError, match="workload"):
        ClassTarget("", device="cuda:0")


def test_a_target_from_nvml_device_info() -> None:
    mig = DeviceInfo(key=MIG, index=1, uuid=G1, pci_bus_id="00000000:2A:00.0", model="NVIDIA H200",
                     mig_profile="3g.71gb", gpu_instance_id=1)
    assert ClassTarget.for_device("asr", mig) == ClassTarget("asr", device=MIG, gpu_uuid=G1, gpu_instance_id=1)
    whole = DeviceInfo(key="cuda:0", index=0, uuid=G0, pci_bus_id="00000000:18:00.0", model="NVIDIA H200")
    assert ClassTarget.for_device("llm", whole).describe() == f"UUID {G0}"
