"""Run the conformance matrix, bench or any command inside the pinned image (docker SDK).

    python -m ci.container --backend rocm [--quick] [--base-image IMG] [--ca-bundle F]
                           [--wheels DIR] [--torch-spec "torch==X triton==Y"] [--timeout S]
                           [-- CMD ...]
    python -m conformance --container ...  /  python -m bench --container ...
        (both: module_in_container(module, argv): ``python -m module argv`` in the image)

Builds (or reuses, by content hash) the image from Dockerfile.<vendor>, runs the command with
the devices the backend needs, streams its output, copies the run's JSONL into the host's
reports/runs/ (also after a time-out or a kill) and exits with the command's status. No
container is left behind: not on failure, not on time-out, not on Ctrl-C.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import sys
import tarfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aoq.testing.records import git_sha
from ci.context import BuildSpec, build_context
from ci.devices import DeviceError, device_options

DOCKERFILES = {"cuda": "Dockerfile.cuda", "rocm": "Dockerfile.rocm", "cpu": "Dockerfile.cuda"}
RESULTS_IN_IMAGE = "/home/aoq/aoq/reports/runs"
PYTHON_IN_IMAGE = "/opt/aoq/bin/python"
REPO = Path(__file__).resolve().parent.parent
IMAGE_REPO = "aoq-conform"
TIMED_OUT, INTERRUPTED = 124, 130
API_TIMEOUT_S = 900
"""Seconds one engine call may take. On the vfs storage driver creating or removing a
container copies or deletes the whole image (~2.3 GB here: minutes); the SDK's 60 s is short."""


class ContainerError(RuntimeError):
    """A failure of the container machinery (not of the suite): says what and how to fix it."""


@dataclass
class Job:
    backend: str
    command: list[str]
    build: BuildSpec
    timeout_s: float | None = None
    results_dir: Path = Path("reports/runs")
    network_mode: str = "host"
    log: Any = field(default_factory=lambda: sys.stdout)  # the one current at creation


@dataclass
class Outcome:
    exit_code: int
    image: str
    collected: list[Path]
    cells: int
    timed_out: bool = False


def connect() -> Any:
    """A docker client that answered a ping, or a ContainerError saying how to get one."""
    try:
        import docker
    except ImportError as e:
        raise ContainerError("the docker SDK is missing: pip install docker==7.1.0") from e
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=API_TIMEOUT_S)
        client.ping()
        return client
    except Exception as e:  # the SDK raises several types for an absent engine
        raise ContainerError(
            f"no Docker engine reachable at {where} ({type(e).__name__}): start one "
            "(as root: `ci/engine.sh start`) or set DOCKER_HOST"
        ) from e


def _base_image_id(client: Any, build: BuildSpec) -> str:
    """The local id of the base image (so a rebuilt base means a new image), or its name."""
    ref = build.base_image
    if ref is None:
        text = (build.repo / build.dockerfile).read_text()
        match = re.search(r"^ARG BASE_IMAGE=(\S+)", text, flags=re.M)
        ref = match.group(1) if match else ""
    try:
        return str(client.images.get(ref).id)
    except Exception:  # not pulled yet: the build pulls it; the name is all we know
        return ref


def ensure_image(client: Any, job: Job) -> str:
    """The image tag for this tree; built (with progress streamed) only if absent."""
    import docker

    context, digest = build_context(job.build)
    base_id = _base_image_id(client, job.build)
    digest = hashlib.sha256(f"{digest}:{base_id}".encode()).hexdigest()
    tag = f"{IMAGE_REPO}:{Path(job.build.dockerfile).suffix.lstrip('.')}-{digest[:16]}"
    try:
        client.images.get(tag)
        print(f"[aoq-container] reusing image {tag}", file=job.log, flush=True)
        return tag
    except docker.errors.ImageNotFound:
        pass
    print(f"[aoq-container] building {tag} from {job.build.dockerfile}", file=job.log, flush=True)
    tail: list[str] = []
    try:
        stream = client.api.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            dockerfile=job.build.dockerfile,
            tag=tag,
            buildargs=job.build.buildargs(),
            network_mode=job.network_mode,
            rm=True,
            forcerm=True,
            decode=True,
        )
        for chunk in stream:
            text = chunk.get("stream") or chunk.get("status") or ""
            if text.strip():
                print(text.rstrip(), file=job.log, flush=True)
                tail = (tail + [text.rstrip()])[-15:]
            if "error" in chunk:
                raise ContainerError(
                    f"image build failed: {chunk['error'].strip()}\n" + "\n".join(tail)
                )
    except docker.errors.APIError as e:
        raise ContainerError(f"image build failed: {e.explanation or e}") from e
    return tag


def collect(container: Any, results_dir: Path) -> list[Path]:
    """Copy every *.jsonl under the image's reports/runs into results_dir (basename only)."""
    import docker

    try:
        stream, _ = container.get_archive(RESULTS_IN_IMAGE)
    except docker.errors.NotFound:
        return []
    results_dir.mkdir(parents=True, exist_ok=True)
    got = []
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if not member.isfile() or not name.endswith(".jsonl"):
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            dest = results_dir / name
            dest.write_bytes(source.read())
            got.append(dest)
    return got


def _count_cells(paths: list[Path]) -> int:
    return sum(
        sum(1 for line in p.read_text().splitlines() if '"type": "record"' in line) for p in paths
    )


def _stream_logs(container: Any, log: Any) -> threading.Thread:
    def pump() -> None:
        for chunk in container.logs(stream=True, follow=True):
            log.write(chunk.decode(errors="replace"))
            log.flush()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except Exception as e:
        raise ContainerError(
            f"container {container.short_id} could not be removed ({e}): "
            f"docker rm -f {container.short_id}"
        ) from e


def run(job: Job) -> Outcome:
    import docker

    client = connect()
    try:
        options = device_options(job.backend, client)
    except DeviceError as e:
        raise ContainerError(str(e)) from e
    image = ensure_image(client, job)
    labels = {"aoq.runner": "1", "aoq.job": uuid.uuid4().hex}
    sha = git_sha(job.build.repo)  # the image holds no .git: its records get the host's commit
    env = {"AOQ_GIT_SHA": sha} if sha != "unknown" else {}
    try:
        container = client.containers.create(
            image, job.command, detach=True, labels=labels, environment=env, **options
        )
    except BaseException:  # Ctrl-C while the engine creates it: it may exist all the same
        for left in client.containers.list(
            all=True, filters={"label": f"aoq.job={labels['aoq.job']}"}, ignore_removed=True
        ):
            _remove(left)
        raise
    exit_code, timed_out, collected = INTERRUPTED, False, []
    try:
        try:
            container.start()
        except docker.errors.APIError as e:
            raise ContainerError(f"the container did not start: {e.explanation or e}") from e
        pump = _stream_logs(container, job.log)
        try:
            exit_code = int(container.wait(timeout=job.timeout_s)["StatusCode"])
        except Exception as e:  # requests' ReadTimeout when the time limit passes
            if "timed out" not in str(e).lower() and "timeout" not in type(e).__name__.lower():
                raise
            timed_out, exit_code = True, TIMED_OUT
            container.kill()
        pump.join(timeout=10)
    finally:
        try:
            collected = collect(container, job.results_dir)
        finally:
            _remove(container)
    cells = _count_cells(collected)
    note = " (timed out: the cells not listed were not run)" if timed_out else ""
    print(
        f"[aoq-container] exit {exit_code}; collected {len(collected)} run file(s), "
        f"{cells} cell record(s) into {job.results_dir}{note}",
        file=job.log,
        flush=True,
    )
    return Outcome(exit_code, image, collected, cells, timed_out)


def run_cli(job: Job) -> int:
    """run() for a command line: the suite's exit status, 2 for a container failure (said on
    stderr), 130 after Ctrl-C (the container is removed either way)."""
    try:
        return run(job).exit_code
    except ContainerError as e:
        print(f"[aoq-container] error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("[aoq-container] interrupted; container removed", file=sys.stderr)
        return INTERRUPTED


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def module_in_container(
    module: str,
    argv: list[str],
    results_dir: Path | None = None,
    dockerfile: str | None = None,
) -> int:
    """``python -m MODULE --container ARGS``: ``python -m MODULE ARGS`` run inside the image of
    ARGS' ``--backend`` (cpu runs in Dockerfile.cuda's image), the JSONL it writes under
    reports/runs copied into ``results_dir`` (default: this checkout's reports/runs). For any
    of the project's entry points that write run files: conformance, bench. Runner settings
    come from AOQ_BASE_IMAGE, AOQ_CA_BUNDLE, AOQ_WHEELS, AOQ_TORCH_SPEC and
    AOQ_CONTAINER_TIMEOUT (seconds). Returns the command's exit status, 2 for a container
    failure, 124 after the time-out, 130 after Ctrl-C."""
    argv = [a for a in argv if a != "--container"]
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--backend", default="auto")
    backend = peek.parse_known_args(argv)[0].backend
    if backend not in DOCKERFILES:
        print(
            f"[aoq-container] error: pick --backend {'|'.join(sorted(DOCKERFILES))} with "
            f"--container (got {backend!r})",
            file=sys.stderr,
        )
        return 2
    timeout = os.environ.get("AOQ_CONTAINER_TIMEOUT")
    build = BuildSpec(
        REPO,
        dockerfile or DOCKERFILES[backend],
        os.environ.get("AOQ_BASE_IMAGE"),
        _env_path("AOQ_CA_BUNDLE"),
        _env_path("AOQ_WHEELS"),
        os.environ.get("AOQ_TORCH_SPEC"),
    )
    command = [PYTHON_IN_IMAGE, "-m", module, *argv]
    results = results_dir or REPO / "reports" / "runs"
    return run_cli(Job(backend, command, build, float(timeout) if timeout else None, results))


def conformance_in_container(conform_argv: list[str]) -> int:
    """``python -m conformance --container ARGS`` (see module_in_container)."""
    return module_in_container("conformance", conform_argv)


def _default_command(backend: str, quick: bool) -> list[str]:
    cmd = ["make", "conform", f"BACKEND={backend}"]
    return cmd + ["QUICK=1"] if quick else cmd


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ci.container",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", choices=sorted(DOCKERFILES), required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dockerfile", help="default: Dockerfile.<vendor> for the backend")
    parser.add_argument("--base-image", help="a locally provided base (sets BASE_IMAGE)")
    parser.add_argument("--ca-bundle", type=Path, help="CA bundle pip trusts during the build")
    parser.add_argument("--wheels", type=Path, help="directory of wheels for offline installs")
    parser.add_argument(
        "--torch-spec", help="torch (+ triton) requirements for a base without torch"
    )
    parser.add_argument("--timeout", type=float, help="seconds before the container is killed")
    parser.add_argument("--results-dir", type=Path, default=Path("reports/runs"))
    parser.add_argument("command", nargs="*", help="command to run instead of make conform")
    args = parser.parse_args(argv)
    build = BuildSpec(
        REPO,
        args.dockerfile or DOCKERFILES[args.backend],
        args.base_image,
        args.ca_bundle,
        args.wheels,
        args.torch_spec,
    )
    job = Job(
        args.backend,
        args.command or _default_command(args.backend, args.quick),
        build,
        args.timeout,
        args.results_dir,
    )
    return run_cli(job)


if __name__ == "__main__":
    sys.exit(main())
