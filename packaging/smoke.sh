#!/usr/bin/env bash
# Show that the built app starts: `--version` (command line) and `--smoke-test` (opens the
# window offscreen on the bundled sample, protects it once, quits).
#   bash packaging/smoke.sh [dist/dpstudio]
set -uo pipefail
DIR="${1:-dist/dpstudio}"
EXE="$DIR/dpstudio"
[ -x "$EXE" ] || EXE="$DIR/dpstudio.exe"
[ -x "$EXE" ] || { echo "no executable in $DIR" >&2; exit 2; }
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
export DPSTUDIO_CONFIG_DIR="$(mktemp -d)"
echo "== $EXE --version"
"$EXE" --version; v=$?
echo "(exit $v)"
echo "== $EXE --smoke-test"
timeout 120 "$EXE" --smoke-test; s=$?
echo "(exit $s)"
rm -rf "$DPSTUDIO_CONFIG_DIR"
exit $s
