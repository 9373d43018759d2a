"""What a container needs from the host for each backend, checked before it starts.

ROCm, as AMD documents for PyTorch containers: ``--device=/dev/kfd --device=/dev/dri
--group-add video --ipc=host --shm-size 8G --security-opt seccomp=unconfined``
(plus the render group, which newer ROCm releases use for /dev/dri/renderD*).
CUDA: a GPU device request, served by the NVIDIA container toolkit.
"""

from __future__ import annotations

import grp
import os
from typing import Any

ROCM_DEVICES = ("/dev/kfd", "/dev/dri")
SHM_SIZE = "16g"


class DeviceError(RuntimeError):
    """The host lacks something the backend needs in the container."""


def _rocm(dev_root: str) -> dict[str, Any]:
    missing = [d for d in ROCM_DEVICES if not os.path.exists(dev_root + d)]
    if missing:
        raise DeviceError(
            f"BACKEND=rocm needs {', '.join(missing)} on the host, which is missing: install the "
            "amdgpu kernel driver (ROCm's amdgpu-dkms) and check that the user can open "
            "/dev/kfd and /dev/dri/renderD* (groups video and render)"
        )
    groups = ["video"] + (["render"] if _group_exists("render") else [])
    return {
        "devices": [f"{d}:{d}:rwm" for d in ROCM_DEVICES],
        "group_add": groups,
        "ipc_mode": "host",
        "shm_size": SHM_SIZE,
        "security_opt": ["seccomp=unconfined"],
        "cap_add": ["SYS_PTRACE"],
    }


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


def _cuda(client: Any) -> dict[str, Any]:
    import docker

    runtimes = (client.info() or {}).get("Runtimes", {}) if client is not None else {}
    if "nvidia" not in runtimes and not os.path.exists("/etc/cdi/nvidia.yaml"):
        raise DeviceError(
            "BACKEND=cuda needs the NVIDIA container toolkit on the Docker host (no 'nvidia' "
            "runtime and no CDI spec found): install nvidia-container-toolkit, run "
            "`nvidia-ctk runtime configure --runtime=docker` and restart dockerd"
        )
    return {
        "device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])],
        "ipc_mode": "host",
        "shm_size": SHM_SIZE,
    }


def device_options(backend: str, client: Any, dev_root: str = "") -> dict[str, Any]:
    """docker create() keyword arguments for ``backend``; DeviceError names what is missing.
    ``dev_root`` prefixes the device paths checked (tests point it at a fake /dev)."""
    if backend == "rocm":
        return _rocm(dev_root)
    if backend == "cuda":
        return _cuda(client)
    return {"shm_size": SHM_SIZE}
