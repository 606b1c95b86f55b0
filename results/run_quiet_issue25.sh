#!/usr/bin/env bash
# Issue 25's two 100,000,000 × 5 ir-dp runs on a QUIET machine (nothing else running):
#   1. 2 workers × 1 GB      (target: ≤ 15 minutes)
#   2. 4 workers × 500 MB    (adding workers, not memory, is what scales)
# Each prints wall time, the peak RSS of every worker (sampled every 0.5 s), spilled bytes,
# the nannies' "exceeded 95 % memory budget" restarts (must be 0) and the memory model.
#
# Disk: DIR (default /tmp/qb-quiet, on / which had 33 GB free) holds the generated Parquet
# (~0.9 GB, reused by the second run), the workers' spill and p2p shuffle files
# (DASK_TEMPORARY_DIRECTORY=DIR/scratch; about 16·N·m + 32·N ≈ 11 GB at the peak) and the
# release (~3 GB, deleted after each run): keep ~15 GB free there.
#
#   cd /work/wt/d-dask (or main after the merge) && . .venv/bin/activate
#   bash results/run_quiet_issue25.sh [DIR] 2>&1 | tee /tmp/qb/quiet25.log
set -euo pipefail
DIR=${1:-/tmp/qb-quiet}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DIR/scratch"
export DASK_TEMPORARY_DIRECTORY="$DIR/scratch"
free_gb=$(df -BG --output=avail "$DIR" | tail -1 | tr -dc 0-9)
echo "$(date -u) on $(hostname); $free_gb GB free in $DIR; load: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$free_gb" -lt 15 ]; then
    echo "less than 15 GB free in $DIR: choose another DIR (first argument)" >&2
    exit 2
fi
for run in "2 1GB" "4 500MB"; do
    set -- $run
    echo
    echo "=== ir-dp 100,000,000 × 5, $1 workers × $2 ($(date -u +%H:%M:%S))"
    /usr/bin/time -f "process: wall %e s, user %U s, sys %S s, max RSS of the client %M KB" \
        python "$HERE/benchmarks/bench_dask.py" --rows 100000000 --cols 5 --parts 100 \
        --workers "$1" --memory-limit "$2" --methods ir-dp --dir "$DIR" \
        2> >(grep -E "exceeded|KilledWorker|Traceback|Error" >&2)
    rm -rf "$DIR/scratch"/* || true
done
echo
echo "$(date -u) done; load: $(cut -d' ' -f1-3 /proc/loadavg).  Delete $DIR when the figures are copied."
