# Two commands do all set-up on a fresh machine (Debian/Ubuntu, Python >= 3.11):
#   make day19   installs what it needs and runs the day19 campaign on this host
#   make test    installs what it needs and runs every test
# PyTorch is large: pip's cache (PIP_CACHE_DIR, default ~/.cache/pip) keeps it between runs.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RESULTS ?= results/day19-$(shell date -u +%Y%m%d-%H%M%S)
DAY19_FLAGS ?=

.PHONY: setup day19 test lint typecheck compose-plugin k8s-cluster clean

setup: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[servers,prometheus,kubernetes,dev]'
	touch $@

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
test: setup $(BROWSER)/node_modules/.installed $(COMPOSE_PLUGIN) k8s-cluster $(PROMETHEUS)
	$(PY) -m ruff check .
	$(PY) -m mypy bench_plugin
	$(PY) -m compileall -q bench_plugin >/dev/null
	$(PY) tools/run_tests.py

lint: setup
	$(PY) -m ruff check .

typecheck: setup
	$(PY) -m mypy bench_plugin

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache .docker
