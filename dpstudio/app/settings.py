"""UI preferences in QSettings (window geometry, splitters, recent files, last folder).

Never the recipe (roles, method, parameters, seed): that lives in the private project file.
The crash-recovery autosave (which holds the seed) lives in the user's private config folder
(owner-only 0700; the file itself 0600).  ``DPSTUDIO_CONFIG_DIR`` relocates the settings and
the recovery file (used by the tests).
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

MAX_RECENT = 8


def config_dir() -> Path:
    env = os.environ.get("DPSTUDIO_CONFIG_DIR")
    if env:
        p = Path(env)
    else:
        base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppConfigLocation)
        p = Path(base or Path.home() / ".config") / "dpstudio"
    p.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not env:  # our own folder: owner-only (a folder named by the user is left as it is)
        try:
            os.chmod(p, 0o700)
        except OSError:  # pragma: no cover - e.g. some network drives
            pass
    return p


def settings() -> QSettings:
    return QSettings(str(config_dir() / "ui.ini"), QSettings.Format.IniFormat)


def recovery_path() -> Path:
    return config_dir() / "recovery.dpsproj"


def recent_files() -> list[str]:
    v = settings().value("recent_files", [])
    if isinstance(v, str):
        v = [v]
    return [str(x) for x in (v or []) if x]


def add_recent_file(path: str) -> list[str]:
    path = str(Path(path).resolve())
    files = [f for f in recent_files() if f != path]
    files.insert(0, path)
    files = files[:MAX_RECENT]
    s = settings()
    s.setValue("recent_files", files)
    s.setValue("last_folder", str(Path(path).parent))
    return files


def last_folder() -> str:
    return str(settings().value("last_folder", str(Path.home())))


def set_last_folder(folder: str) -> None:
    settings().setValue("last_folder", str(folder))
