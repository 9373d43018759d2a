"""The image build context: the project's files plus an optional CA bundle and wheels, as an
in-memory tar, and a content hash that names the image so an unchanged tree reuses it."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

BUILD_DIR = ".aoq-build"
"""Where the optional CA bundle (ca.crt) and wheels (wheels/*.whl) sit in the context."""
EXCLUDED_PREFIXES = ("reports/runs/", "reports/site/", ".aoq-build/")


@dataclass(frozen=True)
class BuildSpec:
    repo: Path
    dockerfile: str
    base_image: str | None = None
    ca_bundle: Path | None = None
    wheels: Path | None = None
    torch_spec: str | None = None

    def buildargs(self) -> dict[str, str]:
        args = {}
        if self.base_image:
            args["BASE_IMAGE"] = self.base_image
        if self.torch_spec:
            args["TORCH_SPEC"] = self.torch_spec
        return args


def project_files(repo: Path) -> list[str]:
    """Tracked and untracked-but-not-ignored files (what a commit of the tree would hold)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    files = sorted({f for f in out.split("\0") if f})
    return [f for f in files if not f.startswith(EXCLUDED_PREFIXES) and (repo / f).is_file()]


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def build_context(spec: BuildSpec) -> tuple[bytes, str]:
    """(gzip-free tar of the context, sha256 hex of everything that shapes the image)."""
    digest = hashlib.sha256()
    digest.update(repr(sorted(spec.buildargs().items())).encode())
    digest.update(spec.dockerfile.encode())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in project_files(spec.repo):
            data = (spec.repo / rel).read_bytes()
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
            info = tar.gettarinfo(str(spec.repo / rel), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(spec.repo / rel, "rb") as f:
                tar.addfile(info, f)
        ca = spec.ca_bundle.read_bytes() if spec.ca_bundle else b""
        digest.update(b"ca\0" + hashlib.sha256(ca).digest())
        _add_bytes(tar, f"{BUILD_DIR}/ca.crt", ca)
        _add_bytes(tar, f"{BUILD_DIR}/wheels/.keep", b"")
        if spec.wheels:
            for whl in sorted(spec.wheels.glob("*.whl")):
                digest.update(whl.name.encode())  # wheel names carry their version
                tar.add(str(whl), arcname=f"{BUILD_DIR}/wheels/{whl.name}")
    return buf.getvalue(), digest.hexdigest()
