#!/usr/bin/env bash
# Issue 27 on a QUIET machine: every figure the issue asks for, in one run (about 10-15 min;
# the rounds are few on purpose, see each line).  Run from the repository root with its
# virtual environment active:
#
#     bash results/run_quiet_issue27.sh 2>&1 | tee results/quiet_issue27.txt
#
# Needs: ARX built at /tmp/arx (driver ArxAdult; its java command line is /tmp/arx/cmd.txt, the
# template bench_cli_large.py's --arx-cmd takes), R with sdcMicro in /work/rlib, ~3 GB free in
# $DIR.  The inputs are made once if missing (Adult x 100: 3,016,200 records; 10,000,000 x 10
# numbers: 473 MB).  Each case prints wall time, the ratio to the pyarrow read+write of the same
# file measured in the same round, CPU seconds (user + sys) and peak memory.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${DIR:-/tmp/dpbench}
mkdir -p "$DIR"
[ -e "$DIR/adult100.csv" ] || python benchmarks/make_adult_copies.py 100 "$DIR/adult100.csv"
ARX_CMD=""
[ -f /tmp/arx/cmd.txt ] && ARX_CMD=$(cat /tmp/arx/cmd.txt)
echo "== $(date -u) load: $(cut -d' ' -f1-3 /proc/loadavg) commit: $(git rev-parse --short HEAD)"

echo "== §1 k-eps, Adult x 100, k = 500, 5 %, precision, --no-measures: floor / dpstudio / ARX, 3 interleaved rounds (~1.5 min)"
if [ -n "$ARX_CMD" ]; then
  python benchmarks/bench_cli_large.py --cases keps --repeat 3 --dir "$DIR" --arx-cmd "$ARX_CMD"
else
  echo "(no /tmp/arx/cmd.txt: ARX not timed)"
  python benchmarks/bench_cli_large.py --cases keps --repeat 3 --dir "$DIR"
fi

echo "== §1 laplace and ir-dp, 10,000,000 x 10 CSV, --no-measures: floor / dpstudio, 2 interleaved rounds each (~4 min)"
python benchmarks/bench_cli_large.py --cases laplace,irdp --repeat 2 --rows 10000000 --dir "$DIR"

echo "== §2 MDAV fixed overhead per engine.protect call (Census, Tarragona, EIA; k = 5), 200 interleaved rounds; sdcMicro 30 calls each"
R_LIBS=/work/rlib python benchmarks/bench_mdav_overhead.py --rounds 200 --r-reps 30

echo "== earlier targets: start-up (protect Census <= 0.5 s) and --version (<= 0.2 s), 10 runs each"
python benchmarks/bench_startup.py --runs 10

echo "== earlier targets: ir-dp 1M x 10 (<= 3 s)"
python benchmarks/bench_engine.py --only ir-dp-1M

echo "== earlier targets: Census sweep (<= 5 s), best of 3"
PYTHONPATH=. python benchmarks/bench_census_sweep.py --repeat 3

echo "== earlier targets: OLA compiled search (same optimal nodes), 3 repeats"
python benchmarks/bench_ola.py --repeat 3 --out /dev/null

echo "== done $(date -u) load: $(cut -d' ' -f1-3 /proc/loadavg)"
