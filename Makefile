# Two commands do all set-up on a fresh machine (Debian/Ubuntu, CPython >= 3.11; the tests run on 3.11):
#   make day19   installs what it needs and runs the day19 campaign on this host
#   make test    installs what it needs and runs every test
# PyTorch is large: the wheels of requirements/test.txt are kept in ~/.cache/bench-plugin/wheels between runs.
#   make lock    recompiles requirements/test.txt (the venv's exact versions, hashed) from requirements/test.in

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RESULTS ?= results/day19-$(shell date -u +%Y%m%d-%H%M%S)
DAY19_FLAGS ?=

.PHONY: setup lock thirdparty day19 test lint typecheck compose-plugin k8s-cluster clean

# The venv is built from requirements/test.txt alone: every version exact, every file hashed (pip refuses
# any other), no dependency resolved here (--no-deps). A changed lock builds the venv anew, so that it holds
# what the lock says and nothing else. The package itself goes in editable, without dependencies and with
# the lock's setuptools (--no-build-isolation: no unhashed build backend); pip check then fails when setup.cfg
# asks for something the lock lacks (run `make lock`).
# The lock's files are downloaded into WHEELS first and installed from there: pip's own HTTP cache keeps
# only responses that say how long they stay fresh, and the registry here sends no such header, so it kept
# nothing and every fresh clone downloaded PyTorch again (~3 GB). pip download skips a file that is already
# there with the lock's hash. Old versions stay there after a lock changes: delete the folder to reclaim them.
LOCK := requirements/test.txt
WHEELS ?= $(HOME)/.cache/bench-plugin/wheels

setup: $(VENV)/.installed

$(VENV)/.locked: $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' || { echo "$(LOCK) is locked for \
	CPython >= 3.11; $(PYTHON) is $$($(PYTHON) -V 2>&1): run make PYTHON=python3.11 ..." >&2; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip download -q --disable-pip-version-check --require-hashes --no-deps -r $(LOCK) -d $(WHEELS)
	$(PY) -m pip install -q --disable-pip-version-check --require-hashes --no-deps --no-index \
		--find-links $(WHEELS) -r $(LOCK)
	touch $@

$(VENV)/.installed: $(VENV)/.locked setup.cfg pyproject.toml
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	touch $@

# `make lock` compiles requirements/test.in (the package's requirements and extras, read from setup.cfg,
# and torch's version) to requirements/test.txt for every CPython from 3.11 and every platform (uv's
# --universal: where versions differ, a marker says which Python gets which; CI's 3.11 and the GPU hosts'
# 3.12 each get one exact, hashed set), keeping every version
# already pinned there that still fits; `make lock UPGRADE=1` takes the newest versions that fit instead.
# uv 0.13.9 from requirements/uv.txt (the lock tools/thirdparty/setup.sh uses too), in its own venv .uv/.
UV_VENV := .uv

$(UV_VENV)/.installed: requirements/uv.txt
	rm -rf $(UV_VENV)
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r $<
	touch $@

lock: $(UV_VENV)/.installed
	$(UV_VENV)/bin/uv pip compile -q --generate-hashes --universal --python-version 3.11 \
		--no-emit-package bench-plugin \
		--custom-compile-command 'make lock' $(if $(UPGRADE),--upgrade) requirements/test.in -o $(LOCK)

# The third-party servers' environments for tests/thirdparty (transformers serve, infinity-emb), each from
# its own lock in .thirdparty/<name>/, with torch linked from .venv; seconds when nothing changed.
thirdparty: setup
	tools/thirdparty/setup.sh

day19: setup
	$(VENV)/bin/locust --headless --only-summary -f locustfiles/mixed.py \
		--scenario scenarios/day19.yaml --results-dir $(RESULTS) $(DAY19_FLAGS)

BROWSER := tests/browser

$(BROWSER)/node_modules/.installed: $(BROWSER)/package.json $(BROWSER)/package-lock.json
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)
	cd $(BROWSER) && npm ci --no-audit --no-fund
	touch $@

# docker compose, for tests/deploy (it validates docker-compose.yml; no engine needed): built from the Go
# module proxy by tools/compose/build.sh, its binary cached by version in ~/.cache/bench-plugin/bin.
COMPOSE_PLUGIN := .docker/cli-plugins/docker-compose

compose-plugin: $(COMPOSE_PLUGIN)

$(COMPOSE_PLUGIN): tools/compose/build.sh tools/compose/go.mod tools/compose/go.sum
	tools/compose/build.sh $(CURDIR)/.docker >/dev/null
	touch $@

# A Kubernetes control plane for the tests (tests/k8s_cluster.py: etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, and kwok for the fake GPU nodes): built from the Go module proxy by
# tools/k8s/build.sh, its binaries cached by version in ~/.cache/bench-plugin/bin (cold: about 7.5 min
# on 2 cores). No stamp in the repo: the script itself finds a cached build and returns at once, so a
# wiped cache is rebuilt rather than trusted.
k8s-cluster:
	tools/k8s/build.sh >/dev/null

# The telemetry tests run a real Prometheus (Debian's package). Installing it enables, and on a host
# with an init system starts, a system service on :9090; the tests start their own on a free port, so
# the system one is stopped and disabled right after the install and holds nothing.
PROMETHEUS := /usr/bin/prometheus
NO_SYSTEM_PROMETHEUS := if [ -d /run/systemd/system ]; then systemctl disable --now prometheus; \
	elif [ -x /etc/init.d/prometheus ]; then /etc/init.d/prometheus stop && update-rc.d prometheus disable; fi

$(PROMETHEUS):
	command -v prometheus >/dev/null || (apt-get update -q && apt-get install -y -q prometheus && $(NO_SYSTEM_PROMETHEUS))

# The package is installed editable, so pip compiles none of its modules; where PYTHONDONTWRITEBYTECODE is
# set, every locust process and server the tests start would compile them again from source (about
# 0.2 CPU-s per locust process here; docs/benchmarks.md). compileall writes only what is out of date.
test: setup thirdparty $(BROWSER)/node_modules/.installed $(COMPOSE_PLUGIN) k8s-cluster $(PROMETHEUS)
	$(PY) -m ruff check .
	$(PY) -m mypy bench_plugin
	$(PY) -m compileall -q bench_plugin >/dev/null
	$(PY) tools/run_tests.py

lint: setup
	$(PY) -m ruff check .

typecheck: setup
	$(PY) -m mypy bench_plugin

clean:
	rm -rf $(VENV) $(UV_VENV) .thirdparty *.egg-info .pytest_cache .ruff_cache .mypy_cache .docker
