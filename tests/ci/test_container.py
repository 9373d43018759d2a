"""The container runner against a real engine: build, reuse, run, log streaming, result
collection, exit status, time-out, Ctrl-C and clean-up, missing devices."""

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aoq.testing.records import git_sha
from ci.container import TIMED_OUT, ContainerError, Job, run
from ci.context import BuildSpec
from ci.devices import DeviceError, device_options

# under pytest-xdist these run on one worker (make's PYTEST_JOBS: --dist loadfile): the engine
# fixture's teardown removes the images made during its session, and test_ctrl_c takes any
# running runner container for its own
pytestmark = pytest.mark.container
RECORD = json.dumps({"type": "record", "case_id": "x"})


def _job(repo: Path, tmp: Path, timeout=120.0, backend="cpu") -> Job:
    return Job(
        backend, [], BuildSpec(repo, "Dockerfile.test"), timeout, tmp / "runs", log=io.StringIO()
    )


def _leftovers(client) -> list:
    # another suite's runner may remove its container between the listing and the inspection
    return client.containers.list(all=True, filters={"label": "aoq.runner=1"}, ignore_removed=True)


def test_build_run_stream_collect_and_exit_status(client, tmp_path, make_project):
    repo = make_project(
        tmp_path / "p",
        f"echo hello $AOQ_GIT_SHA\necho '{RECORD}' > reports/runs/r1.jsonl\nexit 3\n",
    )
    job = _job(repo, tmp_path)
    out = run(job)
    assert out.exit_code == 3
    assert f"hello {git_sha(repo)}\n" in job.log.getvalue()  # the host's commit
    assert [p.name for p in out.collected] == ["r1.jsonl"] and out.cells == 1
    assert not _leftovers(client)
    job2 = _job(repo, tmp_path)
    again = run(job2)  # same tree: the image is reused, not rebuilt
    assert again.image == out.image and "reusing image" in job2.log.getvalue()


def test_timeout_kills_collects_and_cleans_up(client, tmp_path, make_project):
    repo = make_project(
        tmp_path / "p", f"echo '{RECORD}' > reports/runs/partial.jsonl\nsleep 600\n"
    )
    start = time.monotonic()
    out = run(_job(repo, tmp_path, timeout=8))
    assert out.timed_out and out.exit_code == TIMED_OUT
    assert time.monotonic() - start < 120
    assert out.cells == 1  # the cell finished before the kill is kept
    assert not _leftovers(client)


def test_build_failure_is_a_clear_error(client, tmp_path, make_project):
    repo = make_project(tmp_path / "p", "true\n", dockerfile_extra="RUN exit 7\n")
    with pytest.raises(ContainerError, match="image build failed"):
        run(_job(repo, tmp_path))


def test_ctrl_c_leaves_no_container(client, tmp_path, make_project):
    repo = make_project(tmp_path / "p", "echo started\nsleep 600\n")
    code = (
        "import sys; from pathlib import Path; from ci.container import *; "
        "from ci.context import BuildSpec; "
        f"sys.exit(run(Job('cpu', [], BuildSpec(Path({str(repo)!r}), 'Dockerfile.test'), 600, "
        f"Path({str(tmp_path / 'runs')!r}))).exit_code)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
        # a suite started in the background inherits SIGINT ignored, and so would the runner:
        # give it the default disposition, so Python installs its KeyboardInterrupt handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while not any(c.status == "running" for c in _leftovers(client)):
        assert time.monotonic() < deadline and proc.poll() is None, "container never started"
        time.sleep(1)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=180)
    assert proc.returncode != 0
    assert not _leftovers(client)


def test_missing_devices_say_which_and_how(client, tmp_path):
    with pytest.raises(DeviceError, match=r"/dev/kfd.*amdgpu"):
        device_options("rocm", client, dev_root=str(tmp_path))
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kfd").touch()
    with pytest.raises(DeviceError, match="/dev/dri"):
        device_options("rocm", client, dev_root=str(tmp_path))
    (tmp_path / "dev" / "dri").mkdir()
    opts = device_options("rocm", client, dev_root=str(tmp_path))
    assert "video" in opts["group_add"] and opts["security_opt"] == ["seccomp=unconfined"]
    if "nvidia" not in client.info().get("Runtimes", {}):
        with pytest.raises(DeviceError, match="nvidia-container-toolkit"):
            device_options("cuda", client)


def test_no_engine_is_a_clear_error(monkeypatch):
    from ci.container import connect

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(ContainerError, match="no Docker engine reachable"):
        connect()


def test_module_in_container_runs_the_module_with_the_runner_settings(monkeypatch, tmp_path):
    """What `python -m bench --container` / `python -m conformance --container` hand over."""
    import ci.container as container

    jobs = []
    monkeypatch.setattr(container, "run_cli", lambda job: jobs.append(job) or 0)
    monkeypatch.setenv("AOQ_BASE_IMAGE", "base:1")
    monkeypatch.setenv("AOQ_TORCH_SPEC", "torch==9")
    monkeypatch.setenv("AOQ_CONTAINER_TIMEOUT", "42")
    argv = ["--backend", "rocm", "--container", "--quick"]
    assert container.module_in_container("bench", argv, tmp_path) == 0
    (job,) = jobs
    assert job.command == ["/opt/aoq/bin/python", "-m", "bench", "--backend", "rocm", "--quick"]
    assert job.backend == "rocm" and job.build.dockerfile == "Dockerfile.rocm"
    assert job.build.buildargs() == {"BASE_IMAGE": "base:1", "TORCH_SPEC": "torch==9"}
    assert job.timeout_s == 42 and job.results_dir == tmp_path
    assert container.module_in_container("bench", ["--backend", "auto"]) == 2  # pick one
    assert len(jobs) == 1
