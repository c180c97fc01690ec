"""Session fixtures of the third-party tier: tiny random models built once, and real third-party servers
(transformers serve, twice, and infinity-emb) started once on free loopback ports, stopped at the end.

The environments come from tools/thirdparty/setup.sh (.thirdparty/<name>/, which `make test` builds): a
test whose environment is missing or out of date FAILS, saying to run it; nothing here is skipped.

Everything starts at once where it can (``thirdparty``), since on two cores the model builds and the
servers' imports are what the first test would otherwise wait for, one after the other:
- the models: llama and whisper in one process of .thirdparty/transformers, bert in one of
  .thirdparty/infinity (tests/thirdparty/models.py; each saved by the transformers that will read it);
- both transformers servers at once (they load a model by its path on its first request, so they need no
  model to start); infinity-emb as soon as bert is built (it loads its model before it answers).
Each server's fixture then waits for that server alone, so one that does not start fails only its tests.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from thirdparty_testlib import (
    CB_FLAGS,
    MODELS_SCRIPT,
    EnvironmentMissing,
    Server,
    env_dir,
    group_members,
    spawn,
    stop_group,
)

from bench_plugin.sharing.processes import free_port

BUILD_S = 300.0
"""The model builds' time limit (about 10 s each here)."""

INFINITY_MODEL = "tiny-bert"
"""The name infinity-emb serves the tiny BERT under (--served-model-name)."""


@dataclass
class ThirdParty:
    """What the session launched: the model folders, the servers (by fixture name), and why any is missing."""

    work: Path
    models: dict[str, Path] = field(default_factory=dict)
    servers: dict[str, Server] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    """Fixture or model name -> why it is not there (a missing environment, a failed build)."""

    def server(self, name: str) -> Server:
        """The server ``name``, once it answers its health check; fails the test (not skips) otherwise."""
        if name in self.problems:
            pytest.fail(self.problems[name], pytrace=False)
        server = self.servers[name]
        try:
            server.wait_ready()
        except AssertionError as error:
            self.problems[name] = str(error)
            pytest.fail(str(error), pytrace=False)
        return server

    def model(self, name: str) -> Path:
        if name in self.problems:
            pytest.fail(self.problems[name], pytrace=False)
        return self.models[name]

    def stop(self) -> list[str]:
        """Stop every server; what had to be killed or outlived the stop (none, normally)."""
        left = []
        for name, server in self.servers.items():
            stubborn = stop_group(server.process)
            if stubborn:
                left.append(f"{name}: {stubborn} needed SIGKILL")
            if group_members(server.process.pid):
                left.append(f"{name}: {group_members(server.process.pid)} still running")
        return left


def _build_models(work: Path, problems: dict[str, str]) -> dict[str, Path]:
    """Build the tiny models, the two environments' builds side by side; the folder of each that was built."""
    out = work / "models"
    jobs = []
    for env, names in (("transformers", ["llama", "whisper"]), ("infinity", ["bert"])):
        try:
            python = env_dir(env) / "bin" / "python"
        except EnvironmentMissing as error:
            problems.update({n: str(error) for n in names})
            continue
        log = work / f"build-{'-'.join(names)}.log"
        jobs.append((names, log, spawn([str(python), str(MODELS_SCRIPT), str(out), *names], log, work)))
    for names, log, process in jobs:
        try:
            code = process.wait(timeout=BUILD_S)
        except Exception:
            stop_group(process)
            raise
        if code != 0:
            problems.update({n: f"building {', '.join(names)} failed ({code}): {log.read_text()[-3000:]}"
                             for n in names})
    return {name: out / name for name in ("llama", "whisper", "bert") if name not in problems}


def _transformers_serve(work: Path, name: str, flags: list[str], models: dict[str, str]) -> Server:
    port = free_port()
    argv = [str(env_dir("transformers") / "bin" / "transformers"), "serve", "--host", "127.0.0.1", "--port", str(port),
            "--device", "cpu", "--log-level", "info", *flags]
    log = work / f"{name}.log"
    return Server(name, f"http://127.0.0.1:{port}", log, spawn(argv, log, work), models=models)


def _infinity(work: Path, bert: Path) -> Server:
    port = free_port()
    # --url-prefix /v1: infinity's routes are /embeddings and /models unless a prefix is given; its /health
    # stays unprefixed. No torch.compile, no BetterTransformer, no disk cache: a plain torch forward on CPU.
    argv = [str(env_dir("infinity") / "bin" / "infinity_emb"), "v2", "--model-id", str(bert), "--served-model-name",
            INFINITY_MODEL, "--engine", "torch", "--device", "cpu", "--no-compile", "--no-bettertransformer",
            "--no-vector-disk-cache", "--batch-size", "8", "--url-prefix", "/v1", "--host", "127.0.0.1",
            "--port", str(port)]
    log = work / "infinity.log"
    return Server("infinity-emb", f"http://127.0.0.1:{port}", log, spawn(argv, log, work),
                  models={"embedding": INFINITY_MODEL})


@pytest.fixture(scope="session")
def thirdparty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThirdParty]:
    """The models built and the servers launched (not yet waited for), once per session; stopped at its end."""
    work = tmp_path_factory.mktemp("thirdparty")
    launched = ThirdParty(work)
    try:
        try:
            env_dir("transformers")
        except EnvironmentMissing as error:
            launched.problems.update(transformers_server=str(error), transformers_cb_server=str(error))
        else:
            models = work / "models"  # the servers only open these paths on their first request
            llm_asr = {"llm": str(models / "llama"), "asr": str(models / "whisper")}
            launched.servers["transformers_server"] = _transformers_serve(work, "transformers-serve", [], llm_asr)
            launched.servers["transformers_cb_server"] = _transformers_serve(
                work, "transformers-serve-cb", CB_FLAGS, {"llm": llm_asr["llm"]})
        launched.models = _build_models(work, launched.problems)
        for server in ("transformers_server", "transformers_cb_server"):
            for model in ("llama", "whisper"):
                if model in launched.problems and server not in launched.problems:
                    launched.problems[server] = launched.problems[model]
        if "bert" in launched.problems:
            launched.problems["infinity_server"] = launched.problems["bert"]
        else:
            launched.servers["infinity_server"] = _infinity(work, launched.models["bert"])
        yield launched
    finally:
        left = launched.stop()
    assert not left, f"third-party servers outlived the session: {'; '.join(left)}"


@pytest.fixture(scope="session")
def transformers_server(thirdparty: ThirdParty) -> Server:
    """`transformers serve` as it starts by default (one generation at a time), serving the tiny Llama (llm) and
    the tiny Whisper (asr), each named by its folder's path."""
    return thirdparty.server("transformers_server")


@pytest.fixture(scope="session")
def transformers_cb_server(thirdparty: ThirdParty) -> Server:
    """`transformers serve --continuous-batching` (CB_FLAGS), serving the tiny Llama (llm)."""
    return thirdparty.server("transformers_cb_server")


@pytest.fixture(scope="session")
def infinity_server(thirdparty: ThirdParty) -> Server:
    """infinity-emb serving the tiny BERT as INFINITY_MODEL (embedding), its OpenAI routes under /v1."""
    return thirdparty.server("infinity_server")
