"""What a bench run ran on, for ``RunInfo.extra["machine"]``: device name and arch, clocks
and driver where the vendor tool answers, CPU model and threads, torch / triton / torchao
versions, the git sha, and the AOQ_* switches set (A/B runs: a row timed under one says so).
Nothing here may fail a run: an unreadable item says why."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any

import torch

from aoq.backends import platform_of
from aoq.testing.records import RunInfo

NVIDIA_QUERY = (
    "driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,"
    "temperature.gpu,pstate"
)


def _run(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        raise FileNotFoundError(f"{cmd[0]} is not on PATH")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=True).stdout


def gpu_clocks(index: int) -> dict[str, Any]:
    """Driver and clocks from nvidia-smi (NVIDIA) or rocm-smi (AMD), else why not."""
    try:
        if torch.version.hip is not None:
            return {"rocm_smi": _run(["rocm-smi", "-d", str(index), "--showclocks"]).strip()}
        out = _run(
            [
                "nvidia-smi",
                "-i",
                str(index),
                f"--query-gpu={NVIDIA_QUERY}",
                "--format=csv,noheader",
            ]
        )
        return dict(zip(NVIDIA_QUERY.split(","), (v.strip() for v in out.split(",")), strict=False))
    except (OSError, subprocess.SubprocessError) as e:
        return {"clocks": f"unreadable: {type(e).__name__}: {e}"[:300]}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def switches() -> dict[str, str]:
    """The AOQ_* environment variables set for this run (the sha override aside: it is the
    run's git_sha)."""
    env = sorted(os.environ.items())
    return {k: v for k, v in env if k.startswith("AOQ_") and k != "AOQ_GIT_SHA"}


def machine_info(run: RunInfo, device: torch.device, torchao: str | None) -> dict[str, Any]:
    """Everything in one place (the run header's own torch / triton / git_sha included)."""
    info: dict[str, Any] = {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": run.torch,
        "triton": run.triton,
        "torchao": torchao,
        "git_sha": run.git_sha,
        "aoq_env": switches(),
    }
    if device.type == "cuda":
        index = device.index or 0
        props = torch.cuda.get_device_properties(index)
        info.update(
            gpu=props.name,
            arch=platform_of(device).arch,
            sm_count=props.multi_processor_count,
            memory_GiB=round(props.total_memory / 2**30, 1),
            l2_MiB=round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
            cuda=torch.version.cuda,
            hip=torch.version.hip,
            **gpu_clocks(index),
        )
    return info
