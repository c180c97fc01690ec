"""The stand-in dcgm-exporters' pages for the Prometheus tests: known values, in two phases.

Label names, order and values follow dcgm-exporter 4.5.3-4.8.2 (exposition.py cites the files): per
series ``gpu, UUID, pci_bus_id, device, modelName``, for a MIG instance ``GPU_I_PROFILE, GPU_I_ID``,
then ``Hostname``, then the attributes in Go's sorted map order (``container, namespace, pod``) that
its Kubernetes mode adds. Three exporters, one scrape job each:

- ``/a`` node-a in Kubernetes mode with GPU sharing (``--kubernetes-virtual-gpus``): GPU 0 is shared by
  pods llm-0 and embedding-0, so each series is copied per pod (kubernetes.go, toDeviceToSharingPods);
  the per-process fields (FB_USED, GPU_UTIL) differ per pod, the device's fields are the same copy.
  GPU 1 is in MIG mode: instance 1 is pod asr-0's, instance 2 another tenant's; power is the whole
  GPU's (no GPU_I_ID) and no instance has GPU_UTIL or power.
- ``/b`` node-b, scraped as through a ServiceMonitor: the target has ``pod``/``namespace`` labels (the
  exporter's own pod) and honor_labels is false, so Prometheus renames the workload's pod labels to
  ``exported_pod``/``exported_namespace``.
- ``/c`` node-c on bare metal with --use-old-namespace: the UUID label is ``uuid``, no pods.

No page has DCGM_FI_PROF_SM_ACTIVE: it is commented out in dcgm-exporter's default counters.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench_plugin.telemetry import fields as F

G0 = "GPU-7a1c0e52-3f0b-4c55-9a7e-0c1d2e3f4a50"
G1 = "GPU-1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9"
G2 = "GPU-2c3d4e5f-6071-4829-93a4-b5c6d7e8f901"
G3 = "GPU-3d4e5f60-7182-4930-a4b5-c6d7e8f90123"
MIG_ASR = "MIG-4e5f6071-8293-5a41-b5c6-d7e8f9012345"
"""The MIG UUID the plugin calls asr's instance by (it appears in no label: dcgm-exporter never writes it)."""

EXPORTER_POD = ("gpu-operator", "nvidia-dcgm-exporter-7xk2p")
"""Namespace and pod of the exporter on node-b: the scrape target's own labels."""

_A0 = f'gpu="0",UUID="{G0}",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="node-a"'
_A1 = f'gpu="1",UUID="{G1}",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H200"'
A_LLM = f'{_A0},container="llm",namespace="bench",pod="llm-0"'
A_EMBEDDING = f'{_A0},container="embedding",namespace="bench",pod="embedding-0"'
A_ASR = f'{_A1},GPU_I_PROFILE="3g.71gb",GPU_I_ID="1",Hostname="node-a",container="asr",namespace="bench",pod="asr-0"'
A_OTHER = f'{_A1},GPU_I_PROFILE="3g.71gb",GPU_I_ID="2",Hostname="node-a",container="x",namespace="other",pod="x-0"'
A_GPU1 = f'{_A1},Hostname="node-a"'
B_LLM = (f'gpu="0",UUID="{G2}",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",'
         'Hostname="node-b",container="llm",namespace="bench",pod="llm-1"')
C_GPU0 = f'gpu="0",uuid="{G3}",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H200",Hostname="node-c"'


@dataclass(frozen=True)
class Served:
    """One series a stand-in exporter serves, with its value in phase 1 and in phase 2."""

    path: str
    labels: str
    metric: str
    values: tuple[float, float]


SERVED: tuple[Served, ...] = (
    Served("/a", A_LLM, F.GPU_UTIL, (61, 97)),
    Served("/a", A_EMBEDDING, F.GPU_UTIL, (12, 3)),
    Served("/a", A_LLM, F.FB_USED, (30210, 41002)),
    Served("/a", A_EMBEDDING, F.FB_USED, (4300, 4452)),
    Served("/a", A_ASR, F.FB_USED, (20480, 20992)),
    Served("/a", A_OTHER, F.FB_USED, (512, 512)),
    Served("/a", A_LLM, F.FB_FREE, (99000, 88000)),
    Served("/a", A_EMBEDDING, F.FB_FREE, (99000, 88000)),
    Served("/a", A_ASR, F.FB_FREE, (51200, 50688)),
    Served("/a", A_OTHER, F.FB_FREE, (71168, 71168)),
    Served("/a", A_LLM, F.PROF_GR_ENGINE_ACTIVE, (0.612345, 0.973)),
    Served("/a", A_EMBEDDING, F.PROF_GR_ENGINE_ACTIVE, (0.612345, 0.973)),
    Served("/a", A_ASR, F.PROF_GR_ENGINE_ACTIVE, (0.33, 0.41)),
    Served("/a", A_LLM, F.PROF_DRAM_ACTIVE, (0.25, 0.5)),
    Served("/a", A_EMBEDDING, F.PROF_DRAM_ACTIVE, (0.25, 0.5)),
    Served("/a", A_ASR, F.PROF_DRAM_ACTIVE, (0.125, 0.0625)),
    Served("/a", A_LLM, F.POWER_USAGE, (402.125, 655.5)),
    Served("/a", A_EMBEDDING, F.POWER_USAGE, (402.125, 655.5)),
    Served("/a", A_GPU1, F.POWER_USAGE, (88.5, 91.25)),
    Served("/b", B_LLM, F.GPU_UTIL, (45, 46)),
    Served("/b", B_LLM, F.FB_USED, (7000, 7100)),
    Served("/b", B_LLM, F.POWER_USAGE, (300.5, 310.75)),
    Served("/c", C_GPU0, F.GPU_UTIL, (5, 77)),
    Served("/c", C_GPU0, F.FB_USED, (1234, 5678)),
    Served("/c", C_GPU0, F.POWER_USAGE, (75.5, 250.25)),
)

REFERENCE = {"/a": SERVED[0], "/b": SERVED[19], "/c": SERVED[22]}
"""Per page, the series whose samples tell when Prometheus ingested a phase (its two values differ)."""


def _value(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def page(path: str, phase: int) -> str:
    """The /metrics text of exporter ``path`` in ``phase`` (1 or 2): HELP, TYPE, then its series, per metric."""
    help_texts = {**{n: f.help for n, f in F.FIELDS.items()}, **{n: f.help for n, f in F.PROFILING_FIELDS.items()}}
    lines: list[str] = []
    mine = [s for s in SERVED if s.path == path]
    for metric in dict.fromkeys(s.metric for s in mine):
        lines += [f"# HELP {metric} {help_texts[metric]}", f"# TYPE {metric} gauge"]
        lines += [f"{metric}{{{s.labels}}} {_value(s.values[phase - 1])}" for s in mine if s.metric == metric]
    return "\n".join(lines) + "\n"
