#!/usr/bin/env bash
# Fills .whl/ with the cp312 manylinux wheels that a GPU host without network needs to run a campaign
# (locust and its dependencies, pydantic, msgspec). PyTorch, aiohttp, numpy, scipy, matplotlib, pyyaml,
# requests, prometheus_client and nvidia-ml-py are expected there already. Run it on a machine that
# reaches PyPI; .whl/ is git-ignored (add '/.whl/' to .git/info/exclude).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  locust==2.47.0 ConfigArgParse==1.9.0 Flask==3.1.3 flask-cors==6.0.5 Flask-Login==0.6.3 gevent==26.9.0 \
  geventhttpclient==2.6.1 greenlet==3.5.6 zope.event zope.interface pyzmq==27.3.0 python-engineio==4.15.1 \
  python-socketio==5.18.1 bidict==0.24.1 simple-websocket==1.1.0 wsproto==1.3.2 brotli==1.2.1 \
  blinker==1.9.0 itsdangerous==2.2.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types \
  typing-inspection typing-extensions msgspec==0.23.0
ls .whl
