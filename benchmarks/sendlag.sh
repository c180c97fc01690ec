#!/usr/bin/env bash
# The load generator's send lag, before and after a change to it, side by side on one host: SCENARIO
# (default benchmarks/scenarios/h200-sendlag.yaml: the day19-h200 servers and arms at light and busy
# load, 12-s stages, 1 repeat; about 180 s a run on an H200 host) runs twice, one run after the other:
# first with the source of commit BEFORE (default 99de660, whose NVML sampler polled on the event
# loop), then with this working tree. Both summaries, a table of send lag P99 per arm, stage and
# class before vs after (sendlag.md) and the host check (check.txt: the GPU's settings as they were
# found, no server or MPS process, no compute process left) go to $OUT (at most 8 files, for the
# device tool). On a host without a GPU, the check says so and the rest is the same:
#
#   bash benchmarks/sendlag.sh                                              # a GPU host
#   SCENARIO=benchmarks/scenarios/cpu-sendlag.yaml BEFORE=024b34c PYTHON=.venv/bin/python \
#     OUT=/tmp/sendlag-cpu bash benchmarks/sendlag.sh                       # the project's 2-core machine
#
# The "before" source is BEFORE_SRC (default .sendlag-before/, git-ignored through .git/info/exclude):
# made here by `git archive BEFORE bench_plugin locustfiles scenarios setup.cfg pyproject.toml` when it
# is missing and git can; a host without the repository's history (the device machine) needs it
# carried. CAMPAIGN_LIMIT_S (default 235) bounds each run: past it the run gets a Ctrl-C (SIGINT),
# which keeps every completed stage and still writes the summary. Python packages the GPU host lacks
# are installed from .whl/ when that folder exists (benchmarks/fetch_device_wheels.sh fills it).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${OUT:-/tmp/sendlag-out}
BEFORE=${BEFORE:-99de660}
BEFORE_SRC=${BEFORE_SRC:-$PWD/.sendlag-before}
SCENARIO=$(realpath "${SCENARIO:-benchmarks/scenarios/h200-sendlag.yaml}")  # the runs start in their own source
LIMIT=${CAMPAIGN_LIMIT_S:-235}
PYTHON=${PYTHON:-python3}
case $PYTHON in */*) PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON");; esac  # runs from $src
mkdir -p "$OUT_DIR"

if [ ! -d "$BEFORE_SRC/bench_plugin" ]; then
  mkdir -p "$BEFORE_SRC"
  git archive "$BEFORE" bench_plugin locustfiles scenarios setup.cfg pyproject.toml | tar -x -C "$BEFORE_SRC" \
    || { echo "sendlag: no source of $BEFORE in $BEFORE_SRC, and git cannot make it here" >&2; exit 2; }
fi
SITE=
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || { echo "sendlag: installing the carried wheels failed" >&2; exit 2; }
  SITE=/tmp/site
fi
export PYTHONUNBUFFERED=1

. benchmarks/gpu_state.sh  # the repository root, after the cd above
leftovers() {
  pgrep -af "bench_plugin[.]servers" || true
  pgrep -af "nvidia-cuda-mps" || true
}

# run NAME SOURCE: the campaign with the bench_plugin of SOURCE (its servers too: they inherit the path)
run() {
  local name=$1 src=$2 results=/tmp/sendlag-$1 began
  rm -rf "$results"
  began=$(date +%s)
  (cd "$src" && PYTHONPATH="$src${SITE:+:$SITE}" timeout --signal=INT --kill-after=30 "$LIMIT" \
    "$PYTHON" -m locust --headless --only-summary --no-report -f locustfiles/mixed.py --scenario "$SCENARIO" \
    --results-dir "$results" > "$OUT_DIR/$name-locust.log" 2>&1)
  local rc=$?
  echo "$name: exit code $rc after $(( $(date +%s) - began )) s ($src)"
  [ -f "$results/summary.json" ] && cp "$results/summary.json" "$OUT_DIR/$name-summary.json"
  sleep 2
  local left
  left=$(leftovers)
  [ -z "$left" ] || echo "$name: processes left after the run: $left"
  return $rc
}

before_gpu=$(gpu_settings)
run before "$BEFORE_SRC"
rc_before=$?
run after "$PWD"
rc_after=$?
after_gpu=$(gpu_settings)

gpu_check "before ($BEFORE): exit code $rc_before; after (working tree): exit code $rc_after" \
  "$before_gpu" "$after_gpu" > "$OUT_DIR/check.txt"
cat "$OUT_DIR/check.txt"

# the table: send lag P99 (ms) per arm, stage and class, before vs after; and what the self-check said
"$PYTHON" - "$OUT_DIR" "$BEFORE" <<'EOF' > "$OUT_DIR/sendlag.md"
import json, sys
from pathlib import Path

out, before_commit = Path(sys.argv[1]), sys.argv[2]


def stages(name):
    path = out / f"{name}-summary.json"
    if not path.is_file():
        return {}
    found = {}
    for trial in json.loads(path.read_text())["trials"]:
        for stage in trial["stages"]:
            found[(trial["arm"], stage["index"], stage.get("name"))] = stage
    return found


before, after = stages("before"), stages("after")
print(f"# Send lag P99 (ms) per arm, stage and class: before ({before_commit}) vs after (this tree)\n")
print("| arm | stage | class | before | after | after < 2 ms |")
print("|---|---|---|---|---|---|")
worst = None
for key in sorted(set(before) | set(after), key=lambda k: (k[0], k[1])):
    arm, index, label = key
    names = sorted(set(before.get(key, {}).get("classes", {})) | set(after.get(key, {}).get("classes", {})))
    for name in names:
        lag = [side.get(key, {}).get("classes", {}).get(name, {}).get("send_lag_ms", {}).get("p99")
               for side in (before, after)]
        cells = ["-" if v is None else f"{v:.2f}" for v in lag]
        ok = "-" if lag[1] is None else ("yes" if lag[1] < 2.0 else "NO")
        if lag[1] is not None:
            worst = lag[1] if worst is None else max(worst, lag[1])
        print(f"| {arm} | {index} {label or ''} | {name} | {cells[0]} | {cells[1]} | {ok} |")
print(f"\nafter: worst send lag P99 {worst if worst is None else round(worst, 2)} ms over "
      f"{len(after)} stages; send lag P99 < 2 ms in every stage and class: "
      f"{'yes' if worst is not None and worst < 2.0 else 'no'}\n")
print("## Self-check per stage\n")
print("| arm | stage | before: generator-limited | after: generator-limited | after: stalls (count, ms, longest, "
      "main cause) | after: generator cores |")
print("|---|---|---|---|---|---|")
for key in sorted(set(before) | set(after), key=lambda k: (k[0], k[1])):
    b, a = before.get(key, {}), after.get(key, {})
    stalls = [g.get("stalls") for g in a.get("generators", {}).values() if g.get("stalls")]
    if stalls:
        s = stalls[0]
        cause = max(s["causes"].items(), key=lambda kv: kv[1][1])[0] if s["causes"] else "-"
        seen = f"{s['count']}, {s['total_ms']:.0f} ms, {s['max_ms']:.1f} ms, {cause}"
    else:
        seen = "-"
    cores = ", ".join(f"{g['cores']:.2f}" for g in a.get("generators", {}).values()) or "-"
    print(f"| {key[0]} | {key[1]} {key[2] or ''} | {b.get('generator_limited') or '-'} | "
          f"{a.get('generator_limited') or '-'} | {seen} | {cores} |")
EOF
cat "$OUT_DIR/sendlag.md"

grep -q "settings unchanged: yes" "$OUT_DIR/check.txt" && grep -q "server processes left: none" "$OUT_DIR/check.txt" \
  && grep -q "MPS processes left: none" "$OUT_DIR/check.txt" || { echo "sendlag: the host was not left as found" >&2; exit 3; }
[ "$rc_before" = 0 ] && [ "$rc_after" = 0 ] || exit 1
