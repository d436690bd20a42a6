"""What machine a run ran on, for ``summary.json``: results in float32 differ with the CPU's kernels
and the torch build (issue 51), so every run records both, and the GPU where it trained on one."""
from __future__ import annotations

import platform
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what ``platform`` says)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_record(device: torch.device) -> dict[str, Any]:
    """``torch`` (version), ``cpu`` (model) and, on a CUDA ``device``, ``gpu`` (its name)."""
    record = {"torch": torch.__version__, "cpu": cpu_model()}
    if device.type == "cuda":
        record["gpu"] = torch.cuda.get_device_name(device)
    return record
