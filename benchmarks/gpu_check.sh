#!/usr/bin/env bash
# One GPU check of the training runtime + inference export (see benchmarks/gpu_check.py for what it runs).
#   benchmarks/gpu_check.sh [--cpu] [--out DIR] [more gpu_check.py options]
# Python: $PYTHON, else the repo's .venv, else python3. Output: $OUT (or --out), else a temp folder.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
OUTDIR="${OUT:-$(mktemp -d -t gpu-check-out-XXXX)}"
mkdir -p "$OUTDIR"
{
  echo "== $(date -u +%FT%TZ) $(hostname) python: $PY"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  PYTHONUNBUFFERED=1 "$PY" benchmarks/gpu_check.py --out "$OUTDIR" "$@"
  rc=$?
  echo "== exit $rc"
  exit $rc
} 2>&1 | tee "$OUTDIR/gpu_check.log"
exit "${PIPESTATUS[0]}"
