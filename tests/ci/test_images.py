"""The real Dockerfiles, built from a locally made base through BASE_IMAGE (no registry), and a
cpu quick conformance run inside each image (and a quick bench run in one) through the
runner's entry point (what `python -m conformance|bench --container` call), its JSONL collected
into a host folder.
Minutes each on the vfs driver: `make container-test` runs them (after ci/engine.sh base)."""

import json
import os
from pathlib import Path

import pytest

from aoq.testing.records import git_sha
from ci.container import module_in_container

pytestmark = pytest.mark.container_full
REPO = Path(__file__).resolve().parents[2]
BASE = os.environ.get("AOQ_BASE_IMAGE", "aoq-base:bookworm")
WHEELS = Path(os.environ.get("AOQ_WHEELS", "/opt/wheels"))
CA = Path(os.environ.get("AOQ_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))
PINNED = ("torch==", "triton==")  # the CPU development pins (requirements-dev.txt)
TORCH_SPEC = os.environ.get("AOQ_TORCH_SPEC") or " ".join(
    line.split("#")[0].strip()
    for line in (REPO / "requirements-dev.txt").read_text().splitlines()
    if line.startswith(PINNED)
)


@pytest.fixture(scope="module")
def runner_env(client):
    """The runner's settings for a base without torch: the local base, the host's CA bundle,
    a folder holding the CPU torch wheel."""
    try:
        client.images.get(BASE)
    except Exception:
        pytest.fail(f"{BASE} is missing: run `ci/engine.sh base` first")
    if not list(WHEELS.glob("torch-*.whl")):
        pytest.fail(f"no torch wheel in {WHEELS}: set AOQ_WHEELS to a folder holding one")
    env = {
        "AOQ_BASE_IMAGE": BASE,
        "AOQ_WHEELS": str(WHEELS),
        "AOQ_TORCH_SPEC": TORCH_SPEC,
        "AOQ_CONTAINER_TIMEOUT": "1800",
    }
    if CA.exists():
        env["AOQ_CA_BUNDLE"] = str(CA)
    return env


@pytest.mark.parametrize(
    ("dockerfile", "module"),
    [
        ("Dockerfile.cuda", "conformance"),
        ("Dockerfile.cuda", "bench"),
        ("Dockerfile.rocm", "conformance"),
    ],
)
def test_image_builds_from_local_base_and_runs_a_cpu_quick_suite(
    runner_env, monkeypatch, tmp_path, capsys, dockerfile, module
):
    """`python -m conformance|bench --container --backend cpu --quick` in the image (the
    second cuda case reuses the first one's image)."""
    for name, value in runner_env.items():
        monkeypatch.setenv(name, value)
    argv = ["--container", "--backend", "cpu", "--quick"]
    code = module_in_container(module, argv, tmp_path / "runs", dockerfile)
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code == 0, out[-3000:]
    assert "Successfully built" in out or "reusing image" in out
    runs = sorted((tmp_path / "runs").glob("*.jsonl"))
    assert runs, "the run's JSONL was not collected"
    lines = runs[0].read_text().splitlines()
    header = json.loads(lines[0])
    assert header["type"] == "run" and header["kind"] == module and header["backend"] == "cpu"
    assert header["extra"]["quick"]
    assert header["git_sha"] == git_sha(REPO)  # passed in: the image holds no .git
    assert sum(json.loads(line)["type"] == "record" for line in lines[1:]) > 0
