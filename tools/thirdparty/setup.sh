#!/usr/bin/env bash
# Builds the environments of the third-party servers that tests/thirdparty runs (transformers serve,
# infinity-emb), each from its lock of exact versions with hashes, in .thirdparty/<name>/ (git-ignored:
# the folder holds its own .gitignore).
#
#   tools/thirdparty/setup.sh                  build every environment whose lock changed (seconds when none)
#   tools/thirdparty/setup.sh --refresh-locks  compile requirements/<name>.in -> requirements/<name>.txt again
#                                              (uv pip compile --generate-hashes; newest versions the .in allows),
#                                              then build
#
# Each environment is a venv of the main venv's own interpreter (CPython 3.11, the ABI of its torch)
# installed with `pip install --require-hashes --no-deps -r requirements/<name>.txt`. PyTorch and its CUDA
# stack (requirements/main-torch.txt) are not installed again: they are linked from the main venv (.venv,
# `make setup`) into .thirdparty/<name>/torch-site/, which a .pth file appends to sys.path after the
# environment's own site-packages, so the environment's locked packages (numpy 1.26 in infinity's) win.
# A stamp (.thirdparty/<name>/.installed) holds the sha256 of the lock, of this script and of the main
# venv's torch version: when all three match, nothing is done. A built environment is checked before it is
# stamped: torch imports from the main venv, exchanges arrays with the environment's numpy, and the server
# module imports.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
REQ="$ROOT/requirements"
DEST="$ROOT/.thirdparty"
MAIN_PY="$ROOT/.venv/bin/python"
ENVS=(transformers infinity)
UV_VERSION=0.13.9  # must match requirements/uv.in
PLATFORM=(--python-version 3.11 --python-platform x86_64-manylinux_2_28)

declare -A CHECK=(
  [transformers]="import transformers.cli.serving.server, soundfile, soxr, python_multipart"
  [infinity]="import infinity_emb.infinity_server, sentence_transformers"
)

die() { echo "tools/thirdparty/setup.sh: $*" >&2; exit 1; }

[ -x "$MAIN_PY" ] || die "$MAIN_PY is missing: build the main venv first (make setup)"
BASE_PY="$("$MAIN_PY" -c 'import sys; print(sys._base_executable)')"
mkdir -p "$DEST"
[ -f "$DEST/.gitignore" ] || printf '# built by tools/thirdparty/setup.sh\n*\n' >"$DEST/.gitignore"

no_emit_args() {
  local name
  while read -r name; do
    case "$name" in ''|'#'*) continue ;; esac
    printf -- '--no-emit-package\n%s\n' "$name"
  done <"$REQ/main-torch.txt"
}

uv_bin() {
  local venv="$DEST/uv"
  if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$(sha256sum <"$REQ/uv.txt")" ]; then
    rm -rf "$venv"
    "$BASE_PY" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$REQ/uv.txt"
    sha256sum <"$REQ/uv.txt" >"$venv/.installed"
  fi
  [ "$("$venv/bin/uv" --version | cut -d' ' -f2)" = "$UV_VERSION" ] || die "uv is not $UV_VERSION"
  echo "$venv/bin/uv"
}

compile_lock() {  # NAME [extra uv args...]
  local name="$1"; shift
  local uv; uv="$(uv_bin)"
  (cd "$REQ" && "$uv" pip compile -q --generate-hashes "${PLATFORM[@]}" "$@" \
    --custom-compile-command "tools/thirdparty/setup.sh --refresh-locks  # uv $UV_VERSION" \
    "$name.in" -o "$name.txt")
}

refresh_locks() {
  local name
  mapfile -t noemit < <(no_emit_args)
  compile_lock uv
  for name in "${ENVS[@]}"; do
    compile_lock "$name" "${noemit[@]}"
    echo "requirements/$name.txt compiled"
  done
}

# Links every top-level file or folder of the main venv's torch distributions (their RECORD: packages,
# .dist-info, shared libraries) into one folder, so that the environment sees torch and nothing else of .venv.
link_torch() {  # DIR
  "$MAIN_PY" - "$1" "$REQ/main-torch.txt" <<'PY'
import importlib.metadata as md, os, sys
from pathlib import Path

target, names = Path(sys.argv[1]), Path(sys.argv[2]).read_text().split("\n")
target.mkdir(parents=True)
tops = set()
for name in (n.strip() for n in names):
    if not name or name.startswith("#"):
        continue
    dist = md.distribution(name)  # PackageNotFoundError: the main venv lacks it, which is loud
    for file in dist.files or ():
        if file.parts[0] not in ("..", "__pycache__") and not file.parts[0].endswith(".pth"):
            tops.add(Path(dist.locate_file(file.parts[0])))
for top in sorted(tops):
    if top.exists():
        os.symlink(top, target / top.name)
PY
}

build_env() {  # NAME
  local name="$1" venv="$DEST/$1" lock="$REQ/$1.txt"
  [ -f "$lock" ] || die "$lock is missing: run with --refresh-locks"
  local torch_version
  torch_version="$("$MAIN_PY" -c 'import importlib.metadata as m; print(m.version("torch"))')"
  grep -qx "torch==$torch_version" "$REQ/$name.in" \
    || die "the main venv has torch $torch_version but requirements/$name.in pins another: update it, then --refresh-locks"
  local stamp
  stamp="$(cat "$lock" "$0" | sha256sum | cut -d' ' -f1) torch-$torch_version"
  # up to date: the same lock, script and torch, and the links into the main venv still resolve (a main venv
  # built anew elsewhere, or removed, leaves them dangling)
  if [ "$(cat "$venv/.installed" 2>/dev/null)" = "$stamp" ] && [ -e "$venv/torch-site/torch" ]; then
    return 0
  fi
  echo "building .thirdparty/$name from requirements/$name.txt"
  rm -rf "$venv"
  "$BASE_PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$lock"
  link_torch "$venv/torch-site"
  local site
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$venv/torch-site" >"$site/zz_main_venv_torch.pth"
  "$venv/bin/python" - "$venv" <<PY || die ".thirdparty/$name does not work (above)"
import sys
import numpy, torch
assert torch.__file__.startswith(sys.argv[1] + "/torch-site/"), torch.__file__
assert numpy.__file__.startswith(sys.argv[1] + "/lib/"), numpy.__file__
assert torch.from_numpy(numpy.arange(3.0)).add(1).numpy().tolist() == [1.0, 2.0, 3.0]
${CHECK[$name]}
print(f".thirdparty/$name: torch {torch.__version__} (main venv), numpy {numpy.__version__}")
PY
  echo "$stamp" >"$venv/.installed"
}

case "${1:-}" in
  --refresh-locks) refresh_locks ;;
  "") ;;
  *) die "unknown argument $1 (usage: setup.sh [--refresh-locks])" ;;
esac
for name in "${ENVS[@]}"; do
  build_env "$name"
done
