"""Atomic record files: written to a temporary file in the same directory, flushed to disk
(``fsync``), then renamed over the old file, so a crash, a kill or a full disk leaves the previous
version or the new one, never a torn or empty file."""
from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Callable


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> Path:
    """Write ``path`` atomically with ``write(file)``; on any error the temporary file is removed,
    the old ``path`` is left as it was and the error is raised."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) to ``path`` atomically (``atomic_write``)."""
    return atomic_write(path, lambda f: f.write(text.encode()))
