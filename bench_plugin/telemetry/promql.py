"""PromQL: every query the plugin sends to Prometheus is written here, and nowhere else.

The GPU series come from NVIDIA's dcgm-exporter, scraped by the cluster's Prometheus. A stage's
range query for one metric selects the series of every class target of the stage at once: each
target becomes one label set per way of spelling its labels, and the label sets are joined with
``or`` (identical label sets are written once). A target's label set holds, from its ClassTarget:

- GPU: ``UUID="<GPU UUID>"`` (the parent's for MIG), or ``gpu="<N>"`` for a ``cuda:N`` device with
  no UUID given; then ``GPU_I_ID="<id>"`` for a MIG instance, ``GPU_I_ID=""`` (no such label: not a
  MIG series) for a whole GPU. Without a GPU (a pod alone) there is no GPU matcher.
- pod: ``pod="<pod>",namespace="<namespace>"``.

The spellings (LABEL_DIALECTS), from dcgm-exporter 4.5.3-4.8.2: internal/pkg/collector/gpu_collector.go
names the UUID label ``UUID``, or ``uuid`` with --use-old-namespace; internal/pkg/transformation/
const.go and kubernetes.go add pod labels ``pod``/``namespace``, or ``pod_name``/``pod_namespace``
with --use-old-namespace. Prometheus itself renames a scraped label that clashes with a target label
to ``exported_<name>`` unless the job sets ``honor_labels: true``; scraped through a ServiceMonitor the
target has ``pod`` and ``namespace`` (the exporter's own pod), so the workload's pod arrives as
``exported_pod``/``exported_namespace`` and ``pod`` names the exporter.

A class's server series (its engine's own, telemetry/engines.py) are selected by the labels Prometheus gave
the server as a target: a Kubernetes pod's ``namespace`` and ``pod`` (kube-prometheus' ServiceMonitors and
PodMonitors set them), or a static target's ``instance`` (``host:port``). One name is asked as its exporter
may have spelt it (a counter with or without ``_total``), its label sets summed (``max`` for a share).

:func:`selects` answers, for a series' labels, whether a label set selects it, with PromQL's own
rule (``l="v"`` needs the value, ``l=""`` needs the label absent or empty), so the client maps each
returned series to its class the way the query chose it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bench_plugin.telemetry import fields as F
from bench_plugin.telemetry.exposition import LABEL_GPU, LABEL_MIG_ID, LABEL_UUID, LABEL_UUID_OLD
from bench_plugin.telemetry.stage_series import ClassTarget

STAGE_METRICS: tuple[str, ...] = (
    F.GPU_UTIL,
    F.FB_USED,
    F.FB_FREE,
    F.PROF_GR_ENGINE_ACTIVE,
    F.PROF_SM_ACTIVE,
    F.PROF_DRAM_ACTIVE,
    F.POWER_USAGE,
)
"""The DCGM fields queried for every stage, in the order the report lists them."""

CHECK_QUERY = "vector(1)"
"""What ``check()`` asks: any working query API answers it, whatever it scrapes."""

LabelSet = dict[str, str]
"""Label name -> exact value a series must have; ``""`` means the label must be absent (or empty)."""


@dataclass(frozen=True, slots=True)
class LabelDialect:
    """One way a scraped dcgm-exporter series spells its GPU UUID and pod labels."""

    name: str
    uuid: str
    pod: str
    namespace: str


LABEL_DIALECTS: tuple[LabelDialect, ...] = (
    LabelDialect("dcgm-exporter", LABEL_UUID, "pod", "namespace"),
    LabelDialect("renamed by Prometheus (honor_labels: false)", LABEL_UUID, "exported_pod", "exported_namespace"),
    LabelDialect("dcgm-exporter --use-old-namespace", LABEL_UUID_OLD, "pod_name", "pod_namespace"),
)
"""Every spelling a query covers. Where several have the pod labels, the renamed one names the
workload: ``pod`` is then the scrape target's (see the module docstring)."""

POD_PRECEDENCE: tuple[LabelDialect, ...] = (LABEL_DIALECTS[1], LABEL_DIALECTS[0], LABEL_DIALECTS[2])
"""The dialects in the order a series' pod is read from its labels: renamed first."""


def target_label_sets(target: ClassTarget) -> list[LabelSet]:
    """The label sets that select ``target``'s series, one per dialect, duplicates dropped."""
    sets: list[LabelSet] = []
    for dialect in LABEL_DIALECTS:
        labels: LabelSet = {}
        if target.gpu_uuid is not None:
            labels[dialect.uuid] = target.gpu_uuid
        elif target.gpu_index is not None and target.pod is None:
            labels[LABEL_GPU] = str(target.gpu_index)
        if target.gpu_instance_id is not None:
            labels[LABEL_MIG_ID] = str(target.gpu_instance_id)
        elif labels:
            labels[LABEL_MIG_ID] = ""  # a whole GPU: not one of its MIG instances
        if target.pod is not None and target.namespace is not None:
            labels[dialect.pod] = target.pod
            labels[dialect.namespace] = target.namespace
        if labels not in sets:
            sets.append(labels)
    return sets


def selects(labels: Mapping[str, str], label_set: Mapping[str, str]) -> bool:
    """Whether a series with ``labels`` is selected by ``label_set`` (PromQL's equality matchers)."""
    return all(labels.get(name, "") == value for name, value in label_set.items())


def target_selects(target: ClassTarget, labels: Mapping[str, str]) -> bool:
    """Whether the query written for ``target`` selects a series with ``labels``."""
    return any(selects(labels, label_set) for label_set in target_label_sets(target))


def quote(value: str) -> str:
    """A PromQL double-quoted string literal of ``value``."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def selector(metric: str, label_set: Mapping[str, str]) -> str:
    """One instant-vector selector: ``metric{a="x",b=""}``."""
    matchers = ",".join(f"{name}={quote(value)}" for name, value in label_set.items())
    return f"{metric}{{{matchers}}}"


def range_query(metric: str, targets: Iterable[ClassTarget]) -> str:
    """The range query for ``metric`` over every target: their selectors joined with ``or``.

    Raises ValueError without a target: a bare metric name would fetch every GPU Prometheus knows.
    """
    label_sets: list[LabelSet] = []
    for target in targets:
        label_sets += [s for s in target_label_sets(target) if s not in label_sets]
    if not label_sets:
        raise ValueError(f"{metric}: no target to select series for")
    return " or ".join(selector(metric, s) for s in label_sets)


def stage_queries(targets: Sequence[ClassTarget], metrics: Sequence[str] = STAGE_METRICS) -> dict[str, str]:
    """Metric -> its range query over ``targets``: what one stage sends."""
    return {metric: range_query(metric, targets) for metric in metrics}



def name_regex(names: Iterable[str]) -> str:
    """A ``__name__`` regex matching exactly ``names`` (their regex characters escaped)."""
    return "|".join("".join("\\" + c if c in ".+*?^$()[]{}|\\" else c for c in name) for name in sorted(set(names)))


def _server_matchers(names: Iterable[str], label_set: Mapping[str, str]) -> str:
    return ",".join([f"__name__=~{quote(name_regex(names))}", *(f"{k}={quote(v)}" for k, v in label_set.items())])


def names_query(names: Iterable[str], label_set: Mapping[str, str]) -> str:
    """The instant query that says which of ``names`` a server's series (``label_set``) has: one result per name."""
    return f"count by (__name__) ({{{_server_matchers(names, label_set)}}})"


def server_query(names: Iterable[str], label_set: Mapping[str, str], largest: bool = False) -> str:
    """The range query of one server series however its exporter spelt it (``names``: with and without
    ``_total``), its label sets summed (a server's models and engines together), or for a share their largest."""
    return f"{'max' if largest else 'sum'}({{{_server_matchers(names, label_set)}}})"
