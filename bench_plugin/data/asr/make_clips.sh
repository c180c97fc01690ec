#!/usr/bin/env bash
# Regenerates the committed speech clips with espeak-ng (Debian package espeak-ng, 1.51).
# The ASR request set is these files; their sha256 is in every result, so regenerate only on purpose.
set -euo pipefail
cd "$(dirname "$0")"
i=0
while IFS= read -r line; do
  i=$((i + 1))
  espeak-ng -s 160 -w "clip-$(printf %02d "$i").wav" "$line"
done < sentences.txt
