"""A worker process: ``python -m conformance.worker ROLE TASK_FD RESULT_FD``.

ROLE ``case``: runs a case's in-process checks (``cell.run_shape_case``, ``model``) and saves
its checkpoint. ROLE ``fresh``: a *checker* that had done nothing but import aoq before its
first task, and checks saved checkpoints (``fresh.check_case``), one case per task.

The runner starts it with the backend's environment already set (``TRITON_INTERPRET=1`` for
the interpreter, one ``CUDA_VISIBLE_DEVICES`` GPU), so nothing here decides what triton sees.
It says hello (its platform), then reads one JSON task per line and answers one JSON result
per line on its own pipe; its stdout and stderr go to a log the runner quotes when the
process dies. A case that aborts, segfaults or hangs takes only this process down: the runner
records a ``crash`` and starts another. After a task that left the GPU unusable (a sticky CUDA
error such as an illegal memory access), the process answers and exits, so that no later
case is blamed for it.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any


def die_with_parent() -> None:
    """Linux: get SIGKILL when the runner dies (kill -9 of a run must not leave workers)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _injected(kind: str | None) -> None:
    """Test-only faults (``--inject``), before any real work."""
    if kind == "abort":
        os.abort()
    if kind == "segfault":
        ctypes.string_at(0)
    if kind == "hang":
        time.sleep(10**6)
    if kind == "raise":
        raise RuntimeError("injected failure")


def _tamper(kind: str | None, out_dir: Path) -> None:
    """Test-only: change the saved checkpoint the way a corrupted download would."""
    if kind == "tamper-bytes":
        import torch
        from safetensors.torch import load_file, save_file

        sd = torch.load(out_dir / "sd.pt", weights_only=True)
        inner = sd["weight"].tensors()
        first = next(iter(inner.values()))
        first.view(-1).view(torch.uint8)[0] ^= 1
        torch.save(sd, out_dir / "sd.pt")
        path = out_dir / "pretrained" / "model.safetensors"
        flat = load_file(str(path))
        key = next(k for k in flat if k.startswith("weight:"))
        flat[key].view(-1).view(torch.uint8)[0] ^= 1
        save_file(flat, str(path), metadata={"format": "pt", "aoq": "1"})
    elif kind == "tamper-meta":
        meta_path = out_dir / "pretrained" / "aoq.json"
        meta = json.loads(meta_path.read_text())
        n, k = meta["tensors"]["weight"]["shape"]
        meta["tensors"]["weight"]["shape"] = [n, k + 2]
        meta_path.write_text(json.dumps(meta))


def run_fresh(task: dict[str, Any]) -> dict[str, Any]:
    from conformance.fresh import check_case

    start = time.monotonic()
    out = check_case(Path(task["dir"]))
    return {**out, "seconds": round(time.monotonic() - start, 2)}


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    from aoq.testing.matrix import Case
    from conformance.cell import run_shape_case
    from conformance.model import run_model_case

    case = Case.from_json(task["case"])
    start = time.monotonic()
    _injected(case.inject)
    tol, skip = task["tolerance"], task["skip"]
    spec = None
    if case.shape is None:
        results = run_model_case(case, tol)
    else:
        out_dir = Path(task["artifacts"])
        results, spec = run_shape_case(case, tol, skip, out_dir)
        if spec is not None:
            _tamper(case.inject, out_dir)
    return {
        "case_id": case.id,
        "results": [r.to_json() for r in results],
        "fresh": task["artifacts"] if spec is not None else None,
        "seconds": round(time.monotonic() - start, 2),
    }


def _cpu_name() -> str:
    """The CPU model (Linux), else what the platform module knows."""
    import platform as pf

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return pf.processor() or pf.machine()


def platform_features(backend: str) -> dict[str, str]:
    """What this machine has or lacks beyond its backend and arch that changes which kernel a
    case may run: feature -> the probe's reason. The run records them (``extra.features``)
    and reads ``profiles/<backend>+<feature>.toml`` for each (aoq.testing.profiles).

    ``slow-fp8-gemm`` (cpu): torch's CPU fp8 ``_scaled_mm`` is unvectorized here, so the fp8
    W8A8 configs run the reference as a recorded fallback (aoq.tensors.float8's probe)."""
    features: dict[str, str] = {}
    if backend == "cpu":
        from aoq.tensors.float8 import _cpu_scaled_mm_slow

        slow = _cpu_scaled_mm_slow()
        if slow is not None:
            features["slow-fp8-gemm"] = slow
    return features


def hello() -> dict[str, Any]:
    import torch

    import aoq  # noqa: F401  (registers kernels; the platform below depends on it)
    from aoq.backends import platform_of
    from aoq.testing.records import device_name
    from conformance.checks import device_for

    backend = os.environ.get("AOQ_CONFORM_BACKEND", "cpu")
    device = device_for(backend)
    platform = platform_of(device)
    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "hello": True,
        "backend": platform.backend.value,
        "arch": platform.arch,
        "device": device_name(device) if device.type != "cpu" else _cpu_name(),
        "torch": torch.__version__,
        "triton": triton_version,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "pid": os.getpid(),
        "features": platform_features(platform.backend.value),
    }


def device_broken(backend: str) -> str | None:
    """Why the GPU cannot be used any more (a sticky error of an earlier launch), or None."""
    if backend not in ("cuda", "rocm"):
        return None
    import torch

    try:
        torch.cuda.synchronize()
    except Exception as e:  # the CUDA context is poisoned for every later call
        return f"{type(e).__name__}: {e}".splitlines()[0]
    return None


def main(argv: list[str]) -> int:
    die_with_parent()
    faulthandler.enable()  # a segfault or abort prints the Python stack into the log
    faulthandler.register(signal.SIGUSR1)  # and so does a hang, when the runner asks
    role = argv[0]
    if role not in ("case", "fresh"):
        raise SystemExit(f"conformance.worker: role {role!r} is not 'case' or 'fresh'")
    tasks = os.fdopen(int(argv[1]), "r", encoding="utf-8")
    results = os.fdopen(int(argv[2]), "w", encoding="utf-8")
    import torch

    torch.set_num_threads(int(os.environ.get("AOQ_CONFORM_THREADS", "1")))
    backend = os.environ.get("AOQ_CONFORM_BACKEND", "cpu")
    run = run_task if role == "case" else run_fresh

    def send(obj: dict[str, Any]) -> None:
        results.write(json.dumps(obj, allow_nan=True) + "\n")
        results.flush()

    send(hello())
    for line in tasks:
        task = json.loads(line)
        print(f"=== {role} {task.get('id')}", flush=True)
        try:
            answer = run(task)
        except Exception as e:  # a case that raises outside any check: an error, not a crash
            answer = {"case_id": task.get("id"), "error": f"{type(e).__name__}: {e}"}
        broken = device_broken(backend)
        if broken:
            answer["restart"] = broken
        send(answer)
        if broken:
            print(f"=== the GPU is unusable after {task.get('id')}: {broken}; exiting", flush=True)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
