"""Container tests run against a REAL Docker engine and locally made images
(ci/engine.sh start makes both). Where there is none they are skipped with that reason,
except when AOQ_REQUIRE_DOCKER=1 (set by .ci/run), where its absence is a failure."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

# `pytest` (unlike `python -m pytest`) does not put the checkout on sys.path, and pyproject's
# pythonpath=["tests"] would then make `ci` this folder: the repository's ci/ must be findable.
REPO = str(Path(__file__).resolve().parents[2])
if REPO not in sys.path:
    sys.path.append(REPO)

TINY_IMAGE = "aoq-tiny:busybox"  # the quick tests' base: busybox with user aoq (ci/engine.sh)


@pytest.fixture(scope="session")
def client():
    """The engine; at the end of the session the runner images the tests built are removed
    (and the dangling layers of failed builds), as on the vfs driver each costs GBs."""
    from ci.container import IMAGE_REPO, ContainerError, connect

    try:
        c = connect()
        c.images.get(TINY_IMAGE)
    except Exception as e:  # engine or base image missing
        if os.environ.get("AOQ_REQUIRE_DOCKER") == "1":
            raise
        if isinstance(e, ContainerError):
            pytest.skip(f"no Docker engine: {e}")
        pytest.skip(f"image {TINY_IMAGE} missing: run ci/engine.sh start ({e})")
    before = {i.id for i in c.images.list(IMAGE_REPO)}
    yield c
    for image in c.images.list(IMAGE_REPO):
        if image.id not in before:
            c.images.remove(image.id, force=True)
    c.images.prune(filters={"dangling": True})


@pytest.fixture()
def make_project():
    return _make_project


def _make_project(tmp: Path, script: str, dockerfile_extra: str = "") -> Path:
    """A git repo holding a tiny image: its command is ``script`` run as user aoq."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "run.sh").write_text("#!/bin/sh\nset -e\n" + script)
    (tmp / "Dockerfile.test").write_text(
        f"ARG BASE_IMAGE={TINY_IMAGE}\nFROM ${{BASE_IMAGE}}\n"
        "COPY .aoq-build/ /tmp/aoq-build/\n"
        "RUN test -f /tmp/aoq-build/ca.crt\n"
        f"{dockerfile_extra}"
        'COPY run.sh /run.sh\nUSER aoq\nWORKDIR /home/aoq/aoq\nCMD ["sh", "/run.sh"]\n'
    )
    subprocess.run(["git", "init", "-q", str(tmp)], check=True)
    git = ["git", "-C", str(tmp), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "project"], check=True)
    return tmp
