"""The messages between a campaign's master and its workers, and what identifies a worker's software.

Locust carries custom messages both ways (``runner.send_message`` / ``register_message``, msgpack over
ZeroMQ, in order per worker). A worker needs nothing but the locustfile: the master sends it the
request sets when it says hello, and refuses it with one line when its software differs.

    worker                                master
      HELLO (identity, where it runs,  -->
             classes it can send,
             own hashes?)
                                     <--  SETUP (request sets)   or  REFUSED (why)
      READY                          -->
                                     <--  STAGE (the stage, this worker's shares)
      REPORT (samples, in flight,    -->  (every REPORT_INTERVAL_S while there is news
              finished shares, CPU             or a request in flight)
              used per stage, when
              taken)
                                     <--  STOP (a stage's arrivals end early)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench_plugin.results.provenance import package_versions, source_digest
from bench_plugin.results.summary import GeneratorProcess

HELLO = "bench_plugin_hello"
SETUP = "bench_plugin_setup"
REFUSED = "bench_plugin_refused"
READY = "bench_plugin_ready"
STAGE = "bench_plugin_stage"
STOP = "bench_plugin_stop_stage"
REPORT = "bench_plugin_report"

REPORT_INTERVAL_S = 0.2
"""How often a worker ships what it has: samples reach the master (and the live view) this fresh."""

COMPARED_PACKAGES = ("bench-plugin", "locust", "gevent", "geventhttpclient")
"""Packages whose versions must match between master and workers: they shape how requests are sent."""


@dataclass(frozen=True)
class Identity:
    """What a process runs: the compared package versions and the plugin's source digest."""

    packages: dict[str, str | None]
    source: str

    @classmethod
    def here(cls) -> Identity:
        """This process's identity."""
        return cls(package_versions(COMPARED_PACKAGES), source_digest())

    def differences(self, other: Identity) -> list[str]:
        """``what: mine vs theirs`` for each difference (empty when they match)."""
        out = [f"{name} {self.packages.get(name)} vs {other.packages.get(name)}"
               for name in COMPARED_PACKAGES if self.packages.get(name) != other.packages.get(name)]
        if self.source != other.source:
            out.append(f"bench_plugin source {self.source} vs {other.source}")
        return out


@dataclass(frozen=True)
class Hello:
    """A worker introduces itself; with its own --scenario it also says what that scenario holds."""

    identity: Identity
    classes: list[str] = field(default_factory=list)
    """The workload classes its locustfile has user classes of: what it can send."""
    scenario_sha256: str | None = None
    request_sets: dict[str, str] = field(default_factory=dict)
    """Class -> request-set sha256, when the worker built its own from --scenario."""
    process: GeneratorProcess | None = None
    """Where it runs: pid, host, the CPU cores it may run on (recorded with the campaign's load generators);
    None from a worker of a bench-plugin from before."""

    def to_message(self) -> dict[str, Any]:
        """The message payload (plain data: msgpack carries no models)."""
        return {**asdict(self), "process": self.process.model_dump() if self.process is not None else None}

    @classmethod
    def from_message(cls, data: dict[str, Any]) -> Hello:
        """The inverse of to_message."""
        process = data.get("process")
        return cls(Identity(**data["identity"]), list(data.get("classes") or []), data.get("scenario_sha256"),
                   dict(data.get("request_sets") or {}),
                   GeneratorProcess.model_validate(process) if process is not None else None)


def hello_differences(master: Identity, scenario_sha256: str, request_sets: dict[str, str], hello: Hello) -> list[str]:
    """Why the master must refuse this worker: software, scenario or request sets that differ."""
    out = master.differences(hello.identity)
    if hello.scenario_sha256 is not None and hello.scenario_sha256 != scenario_sha256:
        out.append(f"scenario sha256 {scenario_sha256[:12]} vs {hello.scenario_sha256[:12]}")
    for name, sha in sorted(hello.request_sets.items()):
        if request_sets.get(name) != sha:
            out.append(f"{name} request-set sha256 {str(request_sets.get(name))[:12]} vs {sha[:12]}")
    return out
