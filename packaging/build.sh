#!/usr/bin/env bash
# Build the one-folder app into dist/dpstudio/ and smoke-test it.
#   bash packaging/build.sh          (needs: pip install pyinstaller)
set -euo pipefail
cd "$(dirname "$0")/.."
python -m PyInstaller --version >/dev/null 2>&1 || { echo "pip install pyinstaller first" >&2; exit 2; }
[ -f resources/icon.png ] || QT_QPA_PLATFORM=offscreen python packaging/make_icon.py
python -m PyInstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller \
    packaging/dpstudio.spec
bash packaging/smoke.sh dist/dpstudio
