"""ci/hooks/pre-commit (``make hooks``): no commit while reports/runs is out of the tree, none
that deletes or edits a committed run; other commits, new runs included, go through."""

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(repo)}  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env)


def test_pre_commit_guards_the_committed_runs(tmp_path):
    repo = tmp_path / "r"
    (repo / "reports/runs").mkdir(parents=True)
    (repo / "reports/runs/a.jsonl").write_text("{}\n")
    (repo / "code.py").write_text("x = 1\n")
    assert _git(repo, "init", "-q").returncode == 0
    assert (
        _git(repo, "add", "-A").returncode == 0 and _git(repo, "commit", "-qm", "0").returncode == 0
    )
    hooks = repo / ".git/hooks"
    hooks.mkdir(exist_ok=True)
    shutil.copy(REPO / "ci/hooks/pre-commit", hooks / "pre-commit")
    (hooks / "pre-commit").chmod(0o755)

    (repo / "code.py").write_text("x = 2\n")
    (repo / "reports/runs/b.jsonl").write_text("{}\n")  # a new run: fine
    _git(repo, "add", "-A")
    assert _git(repo, "commit", "-qm", "1").returncode == 0

    shutil.move(repo / "reports/runs", tmp_path / "aside")  # out for a device call
    (repo / "code.py").write_text("x = 3\n")
    _git(repo, "add", "code.py")
    out = _git(repo, "commit", "-qm", "2")
    assert out.returncode != 0 and "not in the tree" in out.stderr
    _git(repo, "add", "-A")  # the deletions staged too
    assert _git(repo, "commit", "-qm", "2").returncode != 0
    shutil.move(tmp_path / "aside", repo / "reports/runs")

    _git(repo, "reset", "-q")
    (repo / "reports/runs/a.jsonl").write_text('{"edited": 1}\n')
    _git(repo, "add", "-A")
    out = _git(repo, "commit", "-qm", "3")
    assert out.returncode != 0 and "reports/runs/a.jsonl" in out.stderr
    _git(repo, "checkout", "HEAD", "--", "reports/runs/a.jsonl")
    _git(repo, "rm", "-q", "reports/runs/b.jsonl")
    assert _git(repo, "commit", "-qm", "4").returncode != 0
