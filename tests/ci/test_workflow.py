"""The nightly workflow: the copy GitHub reads is the source's, byte for byte, and the file
says what the nightly promises (backends, gate, publication, minimal permissions, limits).
actionlint checks the rest in `make lint`."""

import re
from pathlib import Path

import yaml  # PyYAML: a dependency of huggingface_hub, which the MiniLM package pins

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "ci" / "workflows" / "nightly.yml"
COPY = REPO / ".github" / "workflows" / "nightly.yml"


def _workflow() -> dict:
    return yaml.safe_load(SOURCE.read_text())


def test_github_copy_is_byte_identical():
    assert COPY.read_bytes() == SOURCE.read_bytes(), (
        "edit ci/workflows/nightly.yml, then: cp ci/workflows/nightly.yml .github/workflows/"
    )


def test_every_backend_runs_conform_and_bench_on_its_runner():
    jobs = _workflow()["jobs"]
    rows = {row["backend"]: row for row in jobs["suite"]["strategy"]["matrix"]["include"]}
    assert set(rows) == {"cpu", "cuda", "rocm"}
    assert rows["cpu"]["runner"] == ["ubuntu-latest"]
    for gpu in ("cuda", "rocm"):
        assert rows[gpu]["runner"] == ["self-hosted", gpu]
        assert rows[gpu]["conform"] == f"make conform BACKEND={gpu} CONTAINER=1"
        assert rows[gpu]["bench"] == f"make bench BACKEND={gpu} CONTAINER=1"
    steps = " ".join(str(s.get("run", "")) for s in jobs["suite"]["steps"])
    assert "ci.nightly stage" in steps
    assert any("upload-artifact" in s.get("uses", "") for s in jobs["suite"]["steps"])


def test_report_gates_merges_renders_and_publishes_after_every_suite():
    jobs = _workflow()["jobs"]
    report = jobs["report"]
    assert report["needs"] == "suite" and "!cancelled()" in report["if"]
    runs = "\n".join(str(s.get("run", "")) for s in report["steps"])
    for needed in (
        "ci.nightly gate",
        "ci/history.sh open",
        "ci/history.sh push",
        "make report CHECK=1",
    ):
        assert needed in runs
    assert "cpu,cuda,rocm" in runs  # a backend with no data fails the gate
    assert jobs["publish"]["needs"] == "report"
    assert any("deploy-pages" in s.get("uses", "") for s in jobs["publish"]["steps"])


def test_permissions_are_minimal_and_every_job_has_a_time_limit():
    wf = _workflow()
    assert wf["permissions"] == {} and wf["concurrency"]["group"] == "nightly"
    granted = {name: job["permissions"] for name, job in wf["jobs"].items()}
    assert granted == {
        "suite": {"contents": "read"},
        "report": {"contents": "write"},
        "publish": {"pages": "write", "id-token": "write"},
    }
    assert all(job["timeout-minutes"] <= 360 for job in wf["jobs"].values())


def test_only_github_owned_actions_pinned_to_a_major_version():
    uses = re.findall(r"uses:\s*(\S+)", SOURCE.read_text())
    assert uses and all(re.fullmatch(r"actions/[a-z-]+@v\d+", u) for u in uses), uses
