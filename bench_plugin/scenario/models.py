"""Scenario models: the one YAML experiment a campaign runs, as strict, validated models.

A scenario fixes everything that must stay the same across arms (workload classes, their models,
request sets, arrival processes, stages, SLOs) and lists the arms that each change exactly one
variable against their baseline (the control arm unless an arm names another). Unknown keys are
rejected: a typo in a fixed condition would otherwise silently change the experiment.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from bench_plugin.scenario.affinity import CpuPlacement
from bench_plugin.scenario.base import PositiveFloat, StrictModel
from bench_plugin.scenario.base import ScenarioError as ScenarioError  # re-exported: it was defined here first
from bench_plugin.scenario.disruption import Disruption, Disruptions
from bench_plugin.scenario.kubernetes import ClassKubernetes, KubernetesSettings, check_node_labels

WORKLOAD_CLASSES: tuple[str, ...] = ("llm", "embedding", "asr")
"""The workload classes, in the order they appear in every table."""


def class_rank(name: str | None) -> int:
    """A class's position in WORKLOAD_CLASSES' order (any other name after them), for sorting by class."""
    return WORKLOAD_CLASSES.index(name) if name in WORKLOAD_CLASSES else len(WORKLOAD_CLASSES)

SHARING_MODES: tuple[str, ...] = ("exclusive", "time-slicing", "mps", "mig")

class Slo(StrictModel):
    """Service-level objectives of one class; P95 of end-to-end latency is always required."""

    p95_ms: PositiveFloat
    ttft_p95_ms: PositiveFloat | None = None
    tpot_p95_ms: PositiveFloat | None = None


class ServerSpec(StrictModel):
    """How the local backend starts this class's server.

    ``kind: reference`` runs ``python -m bench_plugin.servers <class> --size <size> <args>``; ``kind:
    command`` runs ``command`` with ``{port}``, ``{host}``, ``{device}``, ``{model}``, ``{python}``
    (this interpreter), ``{log_dir}`` (the campaign's server logs), ``{arm}`` (the arm's name) and
    ``{sharing}`` (its sharing mode) substituted, for any other OpenAI-compatible server.
    """

    kind: Literal["reference", "command"] = "reference"
    size: str = "auto"
    """A preset of the reference server; ``auto``: tiny on a CPU, GPU-sized on a GPU (see AUTO_SIZES)."""
    args: list[str] = Field(default_factory=list)
    command: list[str] | None = None
    threads: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _command_matches_kind(self) -> ServerSpec:
        if self.kind == "command" and not self.command:
            raise ValueError("kind 'command' needs a non-empty 'command' list")
        if self.kind == "reference" and self.command:
            raise ValueError("'command' is only used with kind 'command'")
        return self


def _token_lengths(value: Any) -> Any:
    """Accept one token count or a list of them; every count must be positive."""
    values = [value] if isinstance(value, int) else value
    if isinstance(values, list) and (not values or any(isinstance(n, int) and n < 1 for n in values)):
        raise ValueError("input_tokens must be one or more positive token counts")
    return values


class LLMRequests(StrictModel):
    """A fixed set of prompts: generated from a seed, or read from a JSONL file (one {"prompt": ...} a line)."""

    file: str | None = None
    count: int = Field(default=64, ge=1)
    input_tokens: list[int] = Field(default_factory=lambda: [128])
    output_tokens: int = Field(default=32, ge=1)
    seed: int = 0

    _input_tokens = field_validator("input_tokens", mode="before")(_token_lengths)


class EmbeddingRequests(StrictModel):
    """A fixed set of embedding batches: generated texts, or a JSONL file (one {"input": [...]} a line)."""

    file: str | None = None
    count: int = Field(default=64, ge=1)
    batch_size: int = Field(default=8, ge=1)
    input_tokens: list[int] = Field(default_factory=lambda: [64])
    seed: int = 0

    _input_tokens = field_validator("input_tokens", mode="before")(_token_lengths)


class ASRRequests(StrictModel):
    """A fixed set of speech clips: every ``*.wav`` in ``clips``.

    ``clips`` is a directory relative to the scenario file; unset, the packaged English clips are used
    (spoken with espeak-ng; bench_plugin/data/asr).
    """

    clips: str | None = None
    count: int | None = Field(default=None, ge=1)
    language: str = "en"


class ClassSpec(StrictModel):
    """What every workload class has: a model, where it is served, how requests arrive, its SLOs."""

    model: str
    endpoint: str | None = None
    server: ServerSpec = Field(default_factory=ServerSpec)
    kubernetes: ClassKubernetes = Field(default_factory=ClassKubernetes)
    """How the kubernetes backend runs this class's server in a pod (default: its reference server)."""
    arrival: Literal["poisson", "plain-poisson", "closed"] = "poisson"
    """``poisson``: exactly round(rate * duration) arrivals per stage at Poisson times (loadgen/arrivals.py);
    ``plain-poisson``: a plain Poisson process, its count random; ``closed``: request loops."""
    slo: Slo
    error_budget: float = Field(default=0.01, ge=0, le=1)
    request_timeout_s: PositiveFloat = 120.0
    max_in_flight: int = Field(default=256, ge=1)
    metrics_url: str | None = None
    """Where the class's server exports its Prometheus metrics, read through every stage (queue depth, running
    requests, queue and compute time: docs/telemetry.md): unset, ``/metrics`` at the server's own URL; a URL, in
    which ``{host}`` stands for the server's host (TEI serves them on a port of their own:
    ``http://{host}:9000/metrics``); ``prometheus`` to read them from the campaign's ``--prometheus-url``, where
    the cluster's Prometheus scrapes the server (by its pod's ``namespace`` and ``pod`` labels, else its
    ``instance``), after each segment; ``off`` to read none."""

    @field_validator("metrics_url")
    @classmethod
    def _metrics_url(cls, value: str | None) -> str | None:
        if value is not None and value not in ("off", "prometheus") and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r}: give an http:// or https:// URL, 'prometheus' or 'off'")
        return value


class LLMClass(ClassSpec):
    """The LLM class: chat or plain completions, streamed, with fixed output lengths where the server allows."""

    api: Literal["chat", "completions"] = "chat"
    requests: LLMRequests = Field(default_factory=LLMRequests)
    fixed_output: bool | Literal["auto"] = "auto"
    """true: send ignore_eos and min_tokens so every arm generates exactly output_tokens per request (a server
    that rejects or ignores them is refused at readiness); false: send neither, the model stops where it
    does; auto: true where the server honours them, else false, said in the results (bench_plugin.run.readiness)."""


EMBEDDING_FORMATS: tuple[str, ...] = ("base64", "float")
"""How an embedding request asks for its vectors (OpenAI's ``encoding_format``)."""


class EmbeddingClass(ClassSpec):
    """The embedding class: batches of texts to /v1/embeddings."""

    requests: EmbeddingRequests = Field(default_factory=EmbeddingRequests)
    encoding_format: Literal["base64", "float"] = "base64"
    """How the vectors are asked for: ``base64`` (little-endian float32 bytes, base64-encoded: what OpenAI's
    Python SDK asks for whenever its caller does not choose, so what production traffic looks like) or
    ``float`` (JSON lists of numbers, about four times the bytes to send and to parse). A server that answers
    floats to a base64 request (SGLang does) is accepted, and each sample records what came back."""


class ASRClass(ClassSpec):
    """The ASR class: WAV clips to /v1/audio/transcriptions."""

    requests: ASRRequests = Field(default_factory=ASRRequests)
    response_format: Literal["json", "text", "verbose_json"] = "json"
    """The transcription's format, as OpenAI's API names them (users/asr.py reads each)."""


class Classes(StrictModel):
    """The workload classes in this scenario; at least one."""

    llm: LLMClass | None = None
    embedding: EmbeddingClass | None = None
    asr: ASRClass | None = None

    @model_validator(mode="after")
    def _at_least_one(self) -> Classes:
        if not self.names():
            raise ValueError("at least one of llm, embedding, asr is required")
        return self

    def names(self) -> list[str]:
        """Class names present, in the canonical order."""
        return [name for name in WORKLOAD_CLASSES if getattr(self, name) is not None]

    def get(self, name: str) -> ClassSpec:
        """The spec of class ``name``."""
        spec = getattr(self, name, None)
        if spec is None:
            raise KeyError(name)
        return spec


class ClassSettings(StrictModel):
    """Per-class knobs an arm may set; each one is a variable of the experiment."""

    memory_limit_mib: int | None = Field(default=None, ge=1)
    thread_percentage: int | None = Field(default=None, ge=1, le=100)
    priority: Literal["high", "normal", "low"] = "normal"
    device: str | None = None
    node_labels: dict[str, str] = Field(default_factory=dict)
    """Kubernetes only: the class's pod must run on a node with all these labels (required node affinity)."""

    _node_labels = field_validator("node_labels")(check_node_labels)


class Arm(StrictModel):
    """One configuration under test."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    control: bool = False
    baseline: str | None = None
    """The arm this one differs from by exactly one variable; the control arm when unset."""
    sharing: Literal["exclusive", "time-slicing", "mps", "mig"] = "exclusive"
    classes: dict[Literal["llm", "embedding", "asr"], ClassSettings] = Field(default_factory=dict)
    cpu_affinity: dict[Literal["llm", "embedding", "asr"], CpuPlacement] = Field(default_factory=dict)
    """Local backend only: the CPU cores (and NUMA node) of each class's server process. One variable:
    the layout of the servers on the cores (disjoint or shared) is what an affinity arm changes."""
    description: str = ""

    def variables(self, class_names: list[str]) -> dict[str, object]:
        """The arm's settings flattened to ``variable -> value``, defaults included (values only compared and shown)."""
        out: dict[str, object] = {"sharing": self.sharing}
        for name in class_names:
            settings = self.classes.get(name, ClassSettings())  # type: ignore[call-overload]
            for key, value in settings.model_dump().items():
                out[f"classes.{name}.{key}"] = value
        out["cpu_affinity"] = {name: self.cpu_affinity[name].model_dump()
                               for name in class_names if name in self.cpu_affinity}
        return out


MAX_STAGE_S = 7 * 24 * 3600.0
"""The longest stage (a week): longer ones are typos, and their timers would outlive any run."""
MAX_STAGE_ARRIVALS = 1_000_000
"""Open-loop arrivals one class may have in one stage: they are planned in memory and each becomes a sample."""
MAX_USERS = 10_000
"""Closed-loop users one class may have in one stage: each is a greenlet with its own connection."""


class Stage(StrictModel):
    """One offered-load level: per class a Poisson rate (req/s) or a number of closed-loop users."""

    duration_s: PositiveFloat = Field(le=MAX_STAGE_S)
    load: dict[Literal["llm", "embedding", "asr"], Annotated[float, Field(ge=0)]]
    name: str | None = None


class Search(StrictModel):
    """Adaptive boundary search, instead of fixed stages: scale one load mix until a stage fails, then bisect.

    Each stage runs ``mix`` times a scale; a stage passes when every class meets its SLOs and error
    budget. Scales grow by ``growth`` from ``start_scale`` until a stage fails (or ``max_scale``
    passes), then the bracket between the last pass and the first fail is halved until it is within
    ``precision`` (relative). Every trial searches on its own; the report gives each arm's boundary
    with its spread over repeats and the number of stage-runs the search took.
    """

    mix: dict[Literal["llm", "embedding", "asr"], PositiveFloat]
    """Per class, the Poisson rate (req/s) at scale 1."""
    start_scale: PositiveFloat = 1.0
    max_scale: PositiveFloat = 64.0
    min_scale: PositiveFloat | None = None
    """Smallest scale tried when the start already fails (default: three growth steps below it)."""
    growth: float = Field(default=2.0, gt=1.0)
    precision: float = Field(default=0.1, gt=0.0, lt=1.0)
    stage_duration_s: PositiveFloat = Field(default=20.0, le=MAX_STAGE_S)
    mixes: Literal["default"] | dict[str, dict[Literal["llm", "embedding", "asr"], Annotated[float, Field(ge=0)]]] \
        | None = None
    """More rays of the envelope, each searched on its own (named mixes, class -> req/s at scale 1; a class left
    out is idle), besides ``mix`` (the ray named ``mix``). ``default``: each class alone, each pair and the whole
    mix, at ``mix``'s rates (analysis/rays.py). None: ``mix`` only."""
    held_out: list[str] = Field(default_factory=list)
    """Rays searched but kept out of the envelope model's fit, to test its predictions (analysis/envelope_model)."""
    confidence: float = Field(default=0.95, ge=0.5, lt=1.0)
    """One-sided confidence of each probe's pass or fail (analysis/probe.py)."""
    max_extensions: int = Field(default=2, ge=0, le=10)
    """Times a probe that its samples cannot decide is run again at the same load, its samples pooled."""
    skip_futile_extensions: bool = False
    """An undecided probe is not run again where, at its estimates, the extensions it has left would not decide it
    (near a boundary where the true fraction is the allowance itself): it is decided on its point estimates at once
    (analysis/probe.extension_futile). A hold runs its extensions whatever they promise, unless
    ``skip_futile_holds``."""
    skip_futile_holds: bool = False
    """The same rule for the hold of a boundary found: an undecided hold is not run again where its extensions are
    not expected to decide it, and is taken on its point estimates at once (held undecided if they are within).
    Off by default: the hold is what confirms the boundary, and one run's point estimate near it is noisier
    (docs/analysis.md, "Extensions that cannot decide")."""
    sustain_s: float | None = Field(default=None, ge=0.0, le=MAX_STAGE_S)
    """How long the found boundary is held to confirm it; default three stage durations; 0: not confirmed."""
    budget: int | None = Field(default=None, ge=1)
    """Most stage-runs per trial segment over all rays (None: no limit); runs go to the least known ray first."""
    warm_start: bool = False
    """A later repeat of an arm starts each ray at the bracket the latest earlier repeat ended it with (its ``lo``,
    then its ``hi``), instead of at ``start_scale``; the boundary still rests on the repeat's own probes
    (analysis/search.py)."""
    stage_requests: int | None = Field(default=None, ge=1)
    """A probe's stage runs until the least loaded class of the probe has been offered this many requests (that
    many over its rate), never shorter than ``stage_duration_s`` nor longer than the hold (``sustain_s``, or
    three stage durations): a low-rate probe is decided in one run rather than extended, a high-rate one does
    not gather ten times the samples its decision needs. None: every probe runs ``stage_duration_s``."""

    def rays(self) -> dict[str, dict[str, float]]:
        """Ray name -> its mix (class -> req/s at scale 1, idle classes left out), ``mix`` first.

        ``mixes: default`` adds each class alone and each pair of classes at ``mix``'s rates, named by their
        classes (``llm``, ``llm+embedding``), so the envelope is searched on every face of the load space.
        """
        main: dict[str, float] = dict(sorted(self.mix.items(), key=lambda kv: class_rank(kv[0])))
        out: dict[str, dict[str, float]] = {"mix": main}
        if self.mixes == "default":
            names = list(main)
            subsets = [[n] for n in names] + [[a, b] for i, a in enumerate(names) for b in names[i + 1:]]
            for subset in subsets:
                if len(subset) < len(names):
                    out["+".join(subset)] = {n: main[n] for n in subset}
        elif self.mixes:
            for ray, mix in self.mixes.items():
                out[ray] = {n: r for n, r in sorted(mix.items(), key=lambda kv: class_rank(kv[0])) if r > 0}
        return out

    @property
    def sustain_duration_s(self) -> float:
        """The sustain stage's length (0: none)."""
        return 3 * self.stage_duration_s if self.sustain_s is None else self.sustain_s

    @property
    def longest_probe_s(self) -> float:
        """The longest a probe's stage runs: ``stage_duration_s``, or with ``stage_requests`` the hold's length."""
        if self.stage_requests is None:
            return self.stage_duration_s
        return min(max(self.stage_duration_s, self.sustain_duration_s or 3 * self.stage_duration_s), MAX_STAGE_S)

    def probe_duration_s(self, load: dict[str, float]) -> float:
        """How long a probe offering ``load`` (class -> req/s) runs: ``stage_duration_s``, or with ``stage_requests``
        N, N over the lowest positive rate of ``load``, within ``stage_duration_s`` and :attr:`longest_probe_s`."""
        rates = [rate for rate in load.values() if rate > 0]
        if self.stage_requests is None or not rates:
            return self.stage_duration_s
        return min(max(self.stage_requests / min(rates), self.stage_duration_s), self.longest_probe_s)

    def stage_length_s(self, load: dict[str, float], *, hold: bool) -> float:
        """How long a stage of the search runs: a hold ``sustain_duration_s``, a probe :meth:`probe_duration_s`."""
        return self.sustain_duration_s if hold else self.probe_duration_s(load)

    @model_validator(mode="after")
    def _range(self) -> Search:
        longest = max(self.longest_probe_s, self.sustain_duration_s)  # a hold may run at max_scale too
        if self.max_scale < self.start_scale:
            raise ValueError(f"max_scale {self.max_scale:g} is below start_scale {self.start_scale:g}")
        for name, rate in self.mix.items():
            _check_arrivals(f"search: mix.{name} x max_scale", rate * self.max_scale, longest)
        if self.sustain_duration_s > MAX_STAGE_S:
            raise ValueError(f"sustain_s: three stage durations ({self.sustain_duration_s:g} s) exceed "
                             f"{MAX_STAGE_S:g} s; give sustain_s")
        if isinstance(self.mixes, dict):
            for ray, mix in self.mixes.items():
                if ray == "mix":
                    raise ValueError("search.mixes: 'mix' names search.mix itself; give the ray another name")
                if not any(rate > 0 for rate in mix.values()):
                    raise ValueError(f"search.mixes.{ray}: give at least one class a positive rate")
                for name, rate in mix.items():
                    _check_arrivals(f"search: mixes.{ray}.{name} x max_scale", rate * self.max_scale, longest)
        return self


class Rollback(StrictModel):
    """Abort a stage (and skip the higher ones of that trial) once it is clearly past saturation; never a stage
    with a disruption, whose errors and latency spike are what it measures."""

    max_error_rate_multiple: PositiveFloat = 10.0
    """Abort when a class's error rate passes this multiple of its error budget."""
    max_p95_multiple: PositiveFloat = 10.0
    """Abort when a class's P95 passes this multiple of its P95 SLO."""
    min_requests: int = Field(default=20, ge=1)
    """Judge a class only once this many of its requests in the stage have ended."""


class Warmup(StrictModel):
    """What each segment sends, unmeasured, after readiness and before its first measured stage.

    A server's first request of a shape pays for allocations, kernel selection or compilation that
    later ones do not; without a warm-up the lowest stage pays it, and P95 can fall as load rises.
    """

    requests: Literal["shapes", "all", "none"] = "shapes"
    """``shapes``: one request of every distinct request shape of the set (LLM input and output tokens,
    embedding batch size and input tokens, ASR clip length); ``all``: every item once; ``none``: no warm-up."""
    duration_s: float = Field(default=0.0, ge=0)
    """Keep sending (the same requests again, in order) until this long has passed."""
    concurrency: int = Field(default=4, ge=1)
    """Requests in flight per class during the warm-up."""
    timeout_s: PositiveFloat = 300.0
    """The whole warm-up of a segment must end within this; a request that fails does not stop it."""


class Scenario(StrictModel):
    """A whole experiment: what stays fixed, what each arm changes, how it is judged."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """Names the default results directory (results/<name>-<UTC time>): letters, digits, '_', '.', '-', no path."""
    description: str = ""
    change: str = ""
    fixed: str | list[str] = ""
    metrics: str | list[str] = ""
    repeats: int = Field(default=3, ge=1)
    order: Literal["interleaved", "sequential"] = "interleaved"
    seed: int = 0
    backend: Literal["local", "manual", "kubernetes"] = "local"
    kubernetes: KubernetesSettings | None = None
    """The kubernetes backend's settings; unset, their defaults."""
    readiness_timeout_s: PositiveFloat = 300.0
    drain_timeout_s: PositiveFloat = 60.0
    allow_multiple_changes: bool = False
    classes: Classes
    arms: list[Arm] = Field(min_length=1)
    stages: list[Stage] = Field(default_factory=list)
    search: Search | None = None
    rollback: Rollback = Field(default_factory=Rollback)
    warmup: Warmup = Field(default_factory=Warmup)
    disruption: Disruptions | None = None
    """What happens to the arm's servers, pods or nodes during a stage of each trial: one block, or a list of
    them in different stages (scenario/disruption.py)."""

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        _check_arms(self)
        _check_stage_classes(self)
        _check_disruption(self)
        return self

    @property
    def disruptions(self) -> list[Disruption]:
        """The scenario's disruptions, in the order written (none, one, or one per stage)."""
        spec = self.disruption
        return [] if spec is None else spec if isinstance(spec, list) else [spec]

    def disruption_of(self, stage: int) -> Disruption | None:
        """The disruption of stage ``stage``, or None."""
        return next((spec for spec in self.disruptions if spec.stage == stage), None)

    @property
    def control(self) -> Arm:
        """The control arm: the reference every comparison is made against."""
        return next(arm for arm in self.arms if arm.control)

    def arm(self, name: str) -> Arm:
        """The arm called ``name``."""
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(name)


def _check_arms(scenario: Scenario) -> None:
    names = [arm.name for arm in scenario.arms]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"arm names must be unique; repeated: {', '.join(duplicates)}")
    controls = [arm.name for arm in scenario.arms if arm.control]
    if len(controls) != 1:
        raise ValueError(f"exactly one arm must have control: true (found {len(controls)}: {controls})")
    class_names = scenario.classes.names()
    by_name = {arm.name: arm for arm in scenario.arms}
    for arm in scenario.arms:
        extra = sorted(set(arm.classes) - set(class_names))
        if extra:
            raise ValueError(f"arm '{arm.name}' sets classes not in the scenario: {', '.join(extra)}")
        extra = sorted(set(arm.cpu_affinity) - set(class_names))
        if extra:
            raise ValueError(f"arm '{arm.name}': cpu_affinity names classes not in the scenario: {', '.join(extra)}")
        if arm.control:
            if arm.baseline is not None:
                raise ValueError(f"the control arm '{arm.name}' cannot have a baseline")
            continue
        base_name = arm.baseline or controls[0]
        if base_name not in by_name:
            raise ValueError(f"arm '{arm.name}': baseline '{base_name}' is not an arm ({', '.join(names)})")
        if base_name == arm.name:
            raise ValueError(f"arm '{arm.name}' cannot be its own baseline")
        changed = changed_variables(by_name[base_name], arm, class_names)
        if not changed:
            raise ValueError(f"arm '{arm.name}' changes nothing against its baseline '{base_name}'")
        if len(changed) > 1 and not scenario.allow_multiple_changes:
            raise ValueError(
                f"arm '{arm.name}' changes {len(changed)} variables against '{base_name}' "
                f"({', '.join(changed)}); change one, or set allow_multiple_changes: true"
            )


def _check_stage_classes(scenario: Scenario) -> None:
    class_names = set(scenario.classes.names())
    if bool(scenario.stages) == (scenario.search is not None):
        raise ValueError("give either 'stages' (a fixed sweep) or 'search' (an adaptive boundary search)")
    if scenario.search is not None:
        missing = sorted(class_names - set(scenario.search.mix))
        if missing:
            raise ValueError(f"search.mix has no rate for: {', '.join(missing)}")
        unknown = sorted(set(scenario.search.mix) - class_names)
        if unknown:
            raise ValueError(f"search.mix names classes not in the scenario: {', '.join(unknown)}")
        closed = [n for n in sorted(class_names) if scenario.classes.get(n).arrival == "closed"]
        if closed:
            raise ValueError(f"search scales Poisson rates; class(es) {', '.join(closed)} are closed-loop")
        if isinstance(scenario.search.mixes, dict):
            for ray, mix in scenario.search.mixes.items():
                unknown = sorted(set(mix) - class_names)
                if unknown:
                    raise ValueError(f"search.mixes.{ray} names classes not in the scenario: {', '.join(unknown)}")
        rays = list(scenario.search.rays())
        for name in scenario.search.held_out:
            if name not in rays:
                raise ValueError(f"search.held_out: no ray named {name!r} (rays: {', '.join(rays)})")
        if scenario.search.held_out and len(rays) - len(set(scenario.search.held_out)) < 2:
            raise ValueError("search.held_out: keep at least two rays to fit the envelope model")
    for i, stage in enumerate(scenario.stages):
        unknown = sorted(set(stage.load) - class_names)
        if unknown:
            raise ValueError(f"stages[{i}].load names classes not in the scenario: {', '.join(unknown)}")
        missing = sorted(class_names - set(stage.load))
        if missing:
            raise ValueError(f"stages[{i}].load has no load for: {', '.join(missing)} (use 0 to idle a class)")
    for name in class_names:
        spec = scenario.classes.get(name)
        for i, stage in enumerate(scenario.stages):
            load = stage.load[name]  # type: ignore[index]
            if spec.arrival != "closed":
                _check_arrivals(f"stages[{i}].load.{name}", load, stage.duration_s)
            elif load != int(load):
                raise ValueError(f"stages[{i}].load.{name}: closed-loop load is a whole number of users")
            elif load > MAX_USERS:
                raise ValueError(f"stages[{i}].load.{name}: {load:,.0f} closed-loop users; a class has at most "
                                 f"{MAX_USERS:,} (each is a greenlet with a connection of its own)")


def _check_arrivals(where: str, rate: float, duration_s: float) -> None:
    """Refuse a stage that would plan more than MAX_STAGE_ARRIVALS arrivals of one class."""
    if rate * duration_s > MAX_STAGE_ARRIVALS:
        raise ValueError(f"{where}: {rate:g} req/s for {duration_s:g} s is {rate * duration_s:,.0f} arrivals; a "
                         f"stage plans at most {MAX_STAGE_ARRIVALS:,} per class (shorter stages, or fewer req/s)")


def _check_disruption(scenario: Scenario) -> None:
    if isinstance(scenario.disruption, list) and not scenario.disruption:
        raise ValueError("disruption is an empty list; leave it out for none")
    stages: set[int] = set()
    for spec in scenario.disruptions:
        if spec.stage in stages:
            raise ValueError(f"disruption: two disruptions in stage {spec.stage}; one stage has at most one")
        stages.add(spec.stage)
        _check_one_disruption(scenario, spec)


def _check_one_disruption(scenario: Scenario, spec: Disruption) -> None:
    if scenario.backend not in spec.backends():
        raise ValueError(f"disruption (kind {spec.kind}) needs backend: {' or '.join(spec.backends())}, "
                         f"not {scenario.backend}")
    if scenario.search is not None:
        raise ValueError("disruption needs fixed stages: an adaptive search decides its stages as it goes")
    if spec.stage >= len(scenario.stages):
        raise ValueError(f"disruption.stage {spec.stage} is not a stage (the scenario has {len(scenario.stages)})")
    duration = scenario.stages[spec.stage].duration_s
    if spec.at_s >= duration:
        raise ValueError(f"disruption.at_s {spec.at_s:g} is not within stage {spec.stage} ({duration:g} s long)")
    unknown = sorted(set(spec.classes or []) - set(scenario.classes.names()))
    if unknown:
        raise ValueError(f"disruption.classes names classes not in the scenario: {', '.join(unknown)}")
    arms = {arm.name for arm in scenario.arms}
    unknown = sorted(set(spec.arms or []) - arms)
    if unknown:
        raise ValueError(f"disruption.arms names arms not in the scenario: {', '.join(unknown)}")


def changed_variables(base: Arm, arm: Arm, class_names: list[str]) -> list[str]:
    """Names of the variables whose values differ between two arms."""
    a, b = base.variables(class_names), arm.variables(class_names)
    return [key for key in a if a[key] != b[key]]
