#!/usr/bin/env bash
# Issue 26 (query desk): re-run the desk's timing benchmark on a QUIET machine and print the
# figures: one answer per mechanism on Census (target <= 50 ms) and on 1,000,000 records
# (target <= 1 s), median of the repeats after one warm-up; wall time and CPU time (user+sys).
# Also times one COLD answer (a fresh process: no cache of any kind) per mechanism on Census.
#
#   bash results/run_quiet_issue26.sh            # writes results/bench_query.txt
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .venv/bin/activate ]; then . .venv/bin/activate; fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC')  load: $(cut -d' ' -f1-3 /proc/loadavg)  commit: $(git rev-parse --short HEAD)"
python benchmarks/bench_query.py --repeats 7 --out results/bench_query.txt
python benchmarks/bench_query.py --cold
