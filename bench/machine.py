"""The machine line every benchmark table carries: CPU model, cores, memory, versions."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe(*packages: tuple[str, str]) -> str:
    """`AMD EPYC, 2 logical cores, 23.5 GiB RAM; Python 3.12.1, numpy 2.5.5, ...`."""
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            mem_kib = int(line.split()[1])
    versions = ", ".join(f"{name} {version}" for name, version in packages)
    return (
        f"{model}, {os.cpu_count()} logical cores, {mem_kib / 2**20:.1f} GiB RAM; "
        f"Python {platform.python_version()}" + (f", {versions}" if versions else "")
    )
