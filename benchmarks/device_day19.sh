#!/usr/bin/env bash
# Runs a GPU campaign (default scenarios/day19-h200.yaml) on an NVIDIA GPU host in one go, checks that
# it left the GPU as it found it (same compute/MIG/persistence settings, no server or MPS process, no
# compute process on the GPU), and packs the results into $OUT (at most 8 files, for the device tool).
#
#   bash benchmarks/device_day19.sh [SCENARIO] [extra locust flags...]
#
# CAMPAIGN_LIMIT_S (default 520) bounds the campaign: past it the campaign gets a Ctrl-C (SIGINT),
# which keeps every completed stage and still writes the reports, so a slow host returns a partial
# campaign instead of nothing.
#
# Exit status: 3 when the GPU was not left as found; else the campaign's own (0 completed, 130 cut by the
# limit's Ctrl-C with its outputs written, 2 failed or refused), and 4 where it ended 0 or 130 without
# its outputs (summary.json, the reports). $OUT then holds only what this slice wrote: the last slice's outputs, carried in RESUME's
# tarball, are removed before the campaign runs.
#
# RESUME=PATH (a results.tar.gz this script wrote before, carried to the host; gzip or xz) continues that campaign
# (--resume) instead of starting a new one: a campaign longer than one device call runs in slices, each
# call carrying the last call's results.tar.gz back. The log says whether the campaign completed.
#
# WARM_FROM=PATH (an earlier campaign's results.tar.gz, carried to the host) starts a new campaign's searches
# from the brackets that campaign left (--warm-start-from); a slice that resumes takes them from its own store.
#
# Python packages the GPU host lacks (locust and its dependencies, pydantic) are installed from .whl/
# when that folder exists (benchmarks/fetch_device_wheels.sh fills it).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${OUT:-/tmp/day19-out}
SCENARIO=${1:-scenarios/day19-h200.yaml}
shift || true
mkdir -p "$OUT_DIR"

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || { echo "device_day19: installing the carried wheels failed" >&2; exit 2; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

. benchmarks/gpu_state.sh  # the repository root, after the cd above
before=$(gpu_settings)
results=/tmp/device-campaign
rm -rf "$results"
where=(--results-dir "$results")
if [ -n "${RESUME:-}" ]; then
  tar -C "$(dirname "$results")" -xf "$RESUME" || { echo "device_day19: cannot unpack $RESUME" >&2; exit 2; }
  [ -d "$results" ] || { echo "device_day19: $RESUME holds no $(basename "$results")/" >&2; exit 2; }
  where=(--resume "$results")
  rm -f "$results"/summary.json "$results"/summary.md "$results"/report.html "$results"/report.md
elif [ -n "${WARM_FROM:-}" ]; then
  rm -rf /tmp/warm-from && mkdir -p /tmp/warm-from
  tar -C /tmp/warm-from -xf "$WARM_FROM" || { echo "device_day19: cannot unpack $WARM_FROM" >&2; exit 2; }
  earlier=$(dirname "$(find /tmp/warm-from -name results.sqlite | head -n 1)")
  [ -f "$earlier/results.sqlite" ] || { echo "device_day19: $WARM_FROM holds no results.sqlite" >&2; exit 2; }
  where+=(--warm-start-from "$earlier")
fi
rm -f "$OUT_DIR"/summary.json "$OUT_DIR"/summary.md "$OUT_DIR"/report.html "$OUT_DIR"/report.md
# --foreground: the Ctrl-C goes to Locust alone, once (without it timeout also signals its process group,
# which gave Locust a second Ctrl-C now and then: the one that forces a quit, before the outputs were
# written); the plugin stops its servers itself.
timeout --foreground --preserve-status --signal=INT --kill-after=60 "${CAMPAIGN_LIMIT_S:-520}" \
  python3 -m locust --headless --only-summary -f locustfiles/mixed.py --scenario "$SCENARIO" \
  "${where[@]}" "$@" > "$OUT_DIR/locust.log" 2>&1
rc=$?
sleep 2
after=$(gpu_settings)
gpu_check "exit code: $rc" "$before" "$after" > "$OUT_DIR/check.txt"
cat "$OUT_DIR/check.txt"
tail -n 5 "$OUT_DIR/locust.log"

for name in summary.json summary.md report.html report.md; do
  [ -f "$results/$name" ] && cp "$results/$name" "$OUT_DIR/"
done
tar -C "$(dirname "$results")" -czf "$OUT_DIR/results.tar.gz" "$(basename "$results")"

grep -q "settings unchanged: yes" "$OUT_DIR/check.txt" && grep -q "server processes left: none" "$OUT_DIR/check.txt" \
  && grep -q "front processes left: none" "$OUT_DIR/check.txt" && grep -q "MPS processes left: none" "$OUT_DIR/check.txt" || { echo "device_day19: the GPU was not left as found" >&2; exit 3; }
if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ]; then
  echo "device_day19: the campaign ended with exit code $rc (locust.log says why)" >&2
  exit "$rc"
fi
if [ ! -f "$results/summary.json" ]; then
  echo "device_day19: the campaign's outputs were not written (exit code $rc): results.tar.gz holds the store alone;" \
    "\`bench-plugin report\` on it says why" >&2
  exit 4
fi
if [ "$rc" -eq 0 ]; then
  echo "device_day19: the campaign completed"
else
  echo "device_day19: the slice was cut at its limit; its outputs show the campaign so far (resume with RESUME=)"
fi
exit "$rc"
