#!/usr/bin/env bash
# One-command GPU check (see scripts/gpu_check.py): random Qwen2.5-7B/0.5B-shaped models on
# the GPU; keyed uniforms bit for bit vs CPU, first-token goodness of fit of every decoder,
# throughput of ar / vsps / pfr / mpfr (B = 4).  No network, nothing downloaded; about
# 8 minutes at most on one H200 (the run is cut at 470 s).
# Usage: scripts/gpu_check.sh [extra options of gpu_check.py]; report in $OUT or benchmarks/out.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
DEST="${OUT:-benchmarks/out}"
mkdir -p "$DEST"
timeout 470 "$PY" scripts/gpu_check.py --device cuda --out "$DEST/gpu_check.md" "$@"
