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

from dpstudio.engine.safe_write import make_folder

MAX_RECENT = 8


def config_dir() -> Path:
    env = os.environ.get("DPSTUDIO_CONFIG_DIR")
    if env:
        p = Path(env)
    else:
        base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppConfigLocation)
        p = Path(base or Path.home() / ".config") / "dpstudio"
    make_folder(p)  # through the one writer (owner-only)
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


def last_export_folder() -> str | None:
    """The folder of the last export (``None`` before the first): where the next release is
    proposed, rather than next to the input.
    """
    v = settings().value("last_export_folder", None)
    return str(v) if v else None


def set_last_export_folder(folder: str) -> None:
    settings().setValue("last_export_folder", str(folder))


# --- large files (issue 12): the Dask path
#: records in the working sample of a file larger than memory
DEFAULT_SAMPLE_ROWS = 200_000


def large_file_bytes() -> int:
    """Files above this many bytes are offered the sample + Dask path: the ``large_file_bytes``
    setting if set (tests lower it), else a quarter of the memory this process may use now (the
    least of the free physical memory, its RLIMIT_AS/RLIMIT_DATA and its control group's limit).
    """
    v = settings().value("large_file_bytes", None)
    if v not in (None, ""):
        return int(v)
    from dpstudio.engine.memory import memory_limits

    limits = memory_limits()
    return int(min(limits.values()) // 4) if limits else 2**31


def set_large_file_bytes(n: int | None) -> None:
    s = settings()
    if n is None:
        s.remove("large_file_bytes")
    else:
        s.setValue("large_file_bytes", int(n))


def sample_rows() -> int:
    """Records in the working sample of a large file (default 200,000)."""
    return int(settings().value("sample_rows", DEFAULT_SAMPLE_ROWS))


def set_sample_rows(n: int) -> None:
    settings().setValue("sample_rows", int(n))


def dask_scheduler() -> str:
    """The address of an existing Dask scheduler ('' : a LocalCluster started per run)."""
    return str(settings().value("dask_scheduler", "") or "")


def set_dask_scheduler(address: str) -> None:
    settings().setValue("dask_scheduler", str(address or ""))


def dask_processes() -> bool:
    """Whether a LocalCluster runs its workers as processes (tests: threads, quicker)."""
    v = settings().value("dask_processes", True)
    return str(v).lower() not in ("false", "0", "no")


def set_dask_processes(processes: bool) -> None:
    settings().setValue("dask_processes", bool(processes))


# --- the query desk's ledger files (one per data set, keyed by the data's SHA-256)
def ledgers_dir() -> Path:
    """Where the app keeps the data sets' ledger files unless the user names another one."""
    p = config_dir() / "ledgers"
    make_folder(p)  # through the one writer (owner-only)
    return p


def ledger_for(digest: str) -> str | None:
    """The ledger file the user chose for the data set of SHA-256 ``digest`` (None: the default)."""
    v = settings().value(f"query_ledgers/{digest}", None)
    return str(v) if v else None


def set_ledger_for(digest: str, path: str | None) -> None:
    """Remember at once (not with the project) which ledger file a data set uses."""
    s = settings()
    if path:
        s.setValue(f"query_ledgers/{digest}", str(path))
    else:
        s.remove(f"query_ledgers/{digest}")
    s.sync()
