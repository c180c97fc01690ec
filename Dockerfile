# The one image every service of docker-compose.yml runs: the plugin, Locust, the reference servers
# (the `servers` extra: PyTorch) and the DCGM-named exporter. Build it with
#
#   docker compose build                                    # or: docker build -t bench-plugin:latest .
#   BENCH_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu docker compose build
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu -t bench-plugin:latest .
#
# By default torch comes from PyPI: its Linux wheels bundle CUDA, so the image serves both compose
# profiles (several GB). The PyTorch CPU index gives a CPU-only torch, much smaller, for the cpu
# profile only. Not built in this project's CI: its machines have no container engine (see README).
FROM python:3.11-slim

ARG TORCH_INDEX_URL=
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# torch first, in its own layer, so that a change to the code does not download it again;
# the requirement matches setup.cfg's servers extra
RUN pip install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "torch>=2.4"

COPY setup.cfg pyproject.toml README.md ./
COPY bench_plugin ./bench_plugin
RUN pip install '.[servers]'

# Commands run from /app, as from the repository root: locust -f locustfiles/mixed.py --scenario scenarios/...
COPY locustfiles ./locustfiles
COPY scenarios ./scenarios

EXPOSE 8089 5557 8000 8001 8002 9400
CMD ["locust", "-f", "locustfiles/mixed.py", "--help"]
