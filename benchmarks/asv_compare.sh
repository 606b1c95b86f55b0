#!/usr/bin/env bash
# asv history of two (or more) commits OFFLINE, in this Python (issue 13).
#
#   benchmarks/asv_compare.sh BEFORE AFTER [asv run options, e.g. -b CensusSweep -b StartUp]
#
# Each commit's tree is exported with `git archive` to a temporary directory and measured with
# `asv run -E existing --set-commit-hash <sha>` and ASV_PYTHONPATH=<that tree>: the benchmark
# process imports that commit's dpstudio (the StartUp subprocesses too), with this machine's
# installed dependencies; no environment is built, nothing is downloaded.  Then
# `asv compare --factor 1.2 BEFORE AFTER` lists every benchmark more than 20 % slower or faster.
# The benchmark definitions are the current checkout's (benchmarks/asv), the data its resources/.
# (With network access, `asv continuous -E virtualenv:3.11 --factor 1.2 BEFORE AFTER` builds one
# environment per commit instead.)
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,14p "$0"; exit 2; }
before=$(git rev-parse "$1"); after=$(git rev-parse "$2"); shift 2
asv machine --yes >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for sha in "$before" "$after"; do
    mkdir -p "$tmp/$sha"
    git archive "$sha" | tar -x -C "$tmp/$sha"
    ASV_PYTHONPATH="$tmp/$sha" asv run -E existing --set-commit-hash "$sha" "$@"
done
asv compare --factor 1.2 --split "$before" "$after"
