#!/usr/bin/env bash
# Runs one campaign (benchmarks/device_day19.sh) whole on a GPU host across several device calls of one warm
# machine: no slice is cut and resumed, so no segment's servers start twice and no stage runs again. Each call
# starts the campaign if none is under way, then watches it for at most WATCH_S seconds and returns what it
# has so far in $OUT; the next call, made while the machine is still held, watches on.
#
#   WATCH_S=560 [STOP_AFTER_S=S] [CAMPAIGN_LIMIT_S=S] [WARM_FROM=PATH] \
#     bash benchmarks/device_watch.sh [SCENARIO] [extra locust flags...]
#
# The first call copies the checkout to /tmp/campaign-src (a later call's copy of the tree then cannot change
# what runs) and starts device_day19.sh from there in a session of its own (setsid: it outlives the call), its
# outputs in /tmp/campaign-out, CAMPAIGN_LIMIT_S (default 1620) its limit. Every call waits until the campaign
# ends or WATCH_S passes; with STOP_AFTER_S, the campaign gets its Ctrl-C (SIGINT, as at the limit: every
# completed stage is kept and the outputs are written) that many seconds into this call, and the call waits for
# its outputs. Into $OUT go watch.log (this call's lines), locust.log (so far) and, while the campaign runs,
# store.tar.xz: a consistent copy of its results directory (results.sqlite through SQLite's backup), which
# device_day19.sh RESUME= continues on a fresh machine if this one is lost. Once the campaign has ended, what
# device_day19.sh wrote instead (check.txt, results.tar.xz, summary.json, summary.md, report.md, exit.txt).
#
# Exit status: 10 while the campaign runs on (call again before the machine is given back); else
# device_day19.sh's own (0 completed, 130 cut with its outputs written, 2, 3 or 4: see that script).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=${OUT:-/tmp/watch-out}
SRC=/tmp/campaign-src
RUN_OUT=/tmp/campaign-out
RESULTS=/tmp/device-campaign  # device_day19.sh's results directory
mkdir -p "$OUT_DIR"
log() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$OUT_DIR/watch.log"; }
started=$SECONDS

running() { [ -f "$RUN_OUT/pid" ] && kill -0 "$(cat "$RUN_OUT/pid")" 2>/dev/null; }

if [ ! -f "$RUN_OUT/pid" ]; then
  rm -rf "$SRC" "$RUN_OUT" && mkdir -p "$SRC" "$RUN_OUT"
  tar --exclude=./.git -cf - . | tar -C "$SRC" -xf - || { log "cannot copy the checkout to $SRC"; exit 2; }
  # shellcheck disable=SC2016  # expanded by the inner shell
  OUT="$RUN_OUT" CAMPAIGN_LIMIT_S="${CAMPAIGN_LIMIT_S:-1620}" setsid bash -c \
    'bash "$0"/benchmarks/device_day19.sh "$@"; echo $? > "$OUT"/exit.txt' "$SRC" "$@" \
    < /dev/null > "$RUN_OUT/day19.log" 2>&1 &
  echo $! > "$RUN_OUT/pid"
  log "started the campaign (pid $(cat "$RUN_OUT/pid"), limit ${CAMPAIGN_LIMIT_S:-1620} s): $*"
else
  log "watching the campaign started earlier (pid $(cat "$RUN_OUT/pid"))"
fi

stopped=0
while running && [ $((SECONDS - started)) -lt "${WATCH_S:-560}" ]; do
  if [ -n "${STOP_AFTER_S:-}" ] && [ "$stopped" -eq 0 ] && [ $((SECONDS - started)) -ge "$STOP_AFTER_S" ]; then
    # device_day19.sh runs Locust under `timeout --foreground`, which passes a SIGINT on to Locust alone
    limiter=$(pgrep -f -o "timeout --foreground --preserve-status --signal=INT" || true)
    [ -n "$limiter" ] && kill -INT "$limiter" && stopped=1 && log "sent the campaign its Ctrl-C (timeout pid $limiter)"
  fi
  sleep 5
done

cp "$RUN_OUT/locust.log" "$OUT_DIR/locust.log" 2>/dev/null || true
if running && [ -f "$RESULTS/results.sqlite" ]; then
  snap=/tmp/campaign-snap
  rm -rf "$snap" && mkdir -p "$snap"
  tar -C "$(dirname "$RESULTS")" --exclude='results.sqlite*' -cf - "$(basename "$RESULTS")" | tar -C "$snap" -xf -
  python3 - "$RESULTS/results.sqlite" "$snap/$(basename "$RESULTS")/results.sqlite" <<'EOF'
import sqlite3, sys
source, target = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
source.backup(target)
target.execute("PRAGMA journal_mode=DELETE")
target.close(), source.close()
EOF
  XZ_OPT="-T0 -6" tar -C "$snap" -cJf "$OUT_DIR/store.tar.xz" "$(basename "$RESULTS")"
  log "the campaign runs on after $((SECONDS - started)) s of this call: store.tar.xz is a copy of its store"
  exit 10
elif running; then
  log "the campaign runs on after $((SECONDS - started)) s of this call (no store yet)"
  exit 10
fi

rc=$(cat "$RUN_OUT/exit.txt" 2>/dev/null || echo 2)
for name in check.txt summary.json summary.md report.md exit.txt day19.log; do
  [ -f "$RUN_OUT/$name" ] && cp "$RUN_OUT/$name" "$OUT_DIR/"
done
XZ_OPT="-T0 -6" tar -C "$(dirname "$RESULTS")" -cJf "$OUT_DIR/results.tar.xz" "$(basename "$RESULTS")"
log "the campaign ended (device_day19.sh exit $rc) after $((SECONDS - started)) s of this call"
exit "$rc"
