"""The real Dockerfiles, built from a locally made base through BASE_IMAGE (no registry), and a
cpu conformance quick run inside the image through the runner, its JSONL collected on the host.
Minutes each on the vfs driver: `make container-test` runs them (after ci/engine.sh base)."""

import io
import json
import os
from pathlib import Path

import pytest

from ci.container import Job, run
from ci.context import BuildSpec

pytestmark = pytest.mark.container_full
REPO = Path(__file__).resolve().parents[2]
BASE = os.environ.get("AOQ_BASE_IMAGE", "aoq-base:bookworm")
WHEELS = Path(os.environ.get("AOQ_TORCH_WHEELS", "/opt/wheels"))
CA = Path(os.environ.get("AOQ_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))


@pytest.fixture(scope="module")
def base(client):
    try:
        client.images.get(BASE)
    except Exception:
        pytest.fail(f"{BASE} is missing: run `ci/engine.sh base` first")
    if not list(WHEELS.glob("torch-*.whl")):
        pytest.fail(f"no torch wheel in {WHEELS}: set AOQ_TORCH_WHEELS to a folder holding one")
    return BASE


@pytest.mark.parametrize("dockerfile", ["Dockerfile.cuda", "Dockerfile.rocm"])
def test_image_builds_from_local_base_and_runs_cpu_quick_matrix(base, tmp_path, dockerfile):
    spec = BuildSpec(
        REPO,
        dockerfile,
        base_image=base,
        ca_bundle=CA if CA.exists() else None,
        wheels=WHEELS,
        torch_spec="torch==2.13.0",
    )
    log = io.StringIO()
    job = Job(
        "cpu", ["make", "conform", "BACKEND=cpu", "QUICK=1"], spec, 1800, tmp_path / "runs", log=log
    )
    out = run(job)
    assert out.exit_code == 0, log.getvalue()[-3000:]
    assert out.collected, "the run's JSONL was not collected"
    header = json.loads(out.collected[0].read_text().splitlines()[0])
    assert header["type"] == "run" and header["backend"] == "cpu" and out.cells > 0
