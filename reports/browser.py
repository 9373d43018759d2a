"""Load a report in headless Chromium and report what a person would see go wrong.

Talks the DevTools protocol over ``--remote-debugging-pipe`` (file descriptors 3 and 4, JSON
messages ended by NUL), so it needs Chromium and nothing else: no driver, no network, a fresh
profile directory per call. Collected as errors: console.error calls, uncaught exceptions, and
browser log entries of level error (a blocked request, a CSP violation), failed loads. The
page must also finish its own script (it sets ``document.body.dataset.ready``).
"""

from __future__ import annotations

import base64
import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)


class BrowserError(RuntimeError):
    """Chromium is missing, did not answer, or the page never finished loading."""


@dataclasses.dataclass
class PageCheck:
    console_errors: list[str]
    screenshot: Path | None
    evaluated: dict[str, Any]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int, read_fd: int) -> None:
        self.proc, self.w, self.r = proc, write_fd, read_fd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self._read(deadline - time.monotonic()):
                if m.get("id") == self.next_id:
                    if "error" in m:
                        raise BrowserError(f"{method}: {m['error']}")
                    return m.get("result", {})
                self.events.append(m)
        raise BrowserError(f"{method}: no answer within {timeout:.0f}s")

    def _read(self, wait: float) -> list[dict[str, Any]]:
        import select

        ready, _, _ = select.select([self.r], [], [], max(0.0, min(wait, 1.0)))
        if not ready:
            return []
        data = os.read(self.r, 1 << 20)
        if not data:
            raise BrowserError(f"chromium exited ({self.proc.poll()})")
        self.buf += data
        *parts, self.buf = self.buf.split(b"\0")
        return [json.loads(p) for p in parts if p]

    def wait_event(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.get("method") == method for e in self.events):
                return
            self.events.extend(self._read(deadline - time.monotonic()))
        raise BrowserError(f"page never fired {method} within {timeout:.0f}s")


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(
                "console.error: "
                + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))
            )
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(
                "exception: " + str(d.get("exception", {}).get("description") or d.get("text"))
            )
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: " + p["entry"].get("text", ""))
        elif method == "Network.loadingFailed" and not p.get("canceled"):
            out.append(f"failed load: {p.get('errorText')} ({p.get('type')})")
    return out


class Browser:
    """One headless Chromium with one tab; ``open`` loads pages in it one after another."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 60.0) -> None:
        exe = find_chromium()
        if exe is None:
            raise BrowserError("no chromium on PATH (Debian: apt-get install chromium)")
        self.width, self.height, self.timeout = width, height, timeout
        self.profile = tempfile.mkdtemp(prefix="aoq-chromium-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()

        def _fds() -> None:
            """In the child: the pipes become fds 3 (commands in) and 4 (replies out); moved
            above 10 first so that neither dup2 overwrites the other's source."""
            hi_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            hi_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_fds,
            close_fds=False,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.pipe = _Pipe(self.proc, to_chrome_w, from_chrome_r)
        try:
            target = self.pipe.send("Target.createTarget", {"url": "about:blank"}, timeout=timeout)
            self.session = self.pipe.send(
                "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
            )["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                self.pipe.send(f"{domain}.enable", session=self.session)
            self.pipe.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                session=self.session,
            )
        except BaseException:
            self.close()
            raise

    def open(
        self,
        page: Path,
        screenshot: Path | None = None,
        evaluate: dict[str, str] | None = None,
        require_ready: bool = True,
        max_height: int = 4000,
    ) -> PageCheck:
        """Load ``page`` (file://), wait for load and the page's script, collect errors and
        failed loads, run the ``evaluate`` expressions ({name: js}), save a screenshot of the
        page's top ``max_height`` pixels. Raises BrowserError."""
        pipe, session = self.pipe, self.session
        pipe.events.clear()
        nav = pipe.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
        if nav.get("errorText"):
            raise BrowserError(f"{page}: {nav['errorText']}")
        pipe.wait_event("Page.loadEventFired", self.timeout)
        results: dict[str, Any] = {}
        exprs = {"ready": "document.body.dataset.ready || ''", **(evaluate or {})}
        for name, js in exprs.items():
            r = pipe.send(
                "Runtime.evaluate", {"expression": js, "returnByValue": True}, session=session
            )
            results[name] = r.get("result", {}).get("value")
        if require_ready and results["ready"] != "1":
            raise BrowserError(
                f"{page.name}: the page's script did not finish (body.dataset.ready)"
            )
        shot = None
        if screenshot is not None:
            size = pipe.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            clip = {
                "x": 0,
                "y": 0,
                "width": self.width,
                "scale": 1,
                "height": min(max(size["height"], self.height), max_height),
            }
            data = pipe.send(
                "Page.captureScreenshot",
                {"format": "png", "clip": clip, "captureBeyondViewport": True},
                session=session,
            )
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(data["data"]))
            shot = screenshot
        time.sleep(0.2)
        pipe.events.extend(pipe._read(0.2))
        return PageCheck(_errors(pipe.events), shot, results)

    def close(self) -> None:
        try:
            msg = {"id": 10**6, "method": "Browser.close"}
            os.write(self.pipe.w, json.dumps(msg).encode() + b"\0")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired, AttributeError):
            self.proc.kill()
            self.proc.wait()
        if hasattr(self, "pipe"):
            os.close(self.pipe.w)
            os.close(self.pipe.r)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_page(
    page: Path,
    screenshot: Path | None = None,
    width: int = 1400,
    height: int = 1000,
    evaluate: dict[str, str] | None = None,
    timeout: float = 60.0,
    require_ready: bool = True,
) -> PageCheck:
    """One page in a fresh Chromium (see ``Browser.open``). Raises BrowserError."""
    with Browser(width, height, timeout) as b:
        return b.open(page, screenshot, evaluate, require_ready)


def check_pages(
    pages: dict[str, Path], screenshots: Path | None = None, timeout: float = 60.0
) -> dict[str, PageCheck]:
    """Every page in one Chromium; a screenshot ``<screenshots>/<name>.png`` per page."""
    with Browser(timeout=timeout) as b:
        return {
            name: b.open(path, screenshots / f"{name}.png" if screenshots else None)
            for name, path in pages.items()
        }
