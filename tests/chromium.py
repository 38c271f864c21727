"""A small headless-Chromium driver for tests: the DevTools protocol over a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on file descriptors 3 and 4), so no
websocket library and no open port are needed.

:func:`open_page` loads a file and returns what a reader would see and what went wrong: console
messages, uncaught exceptions, JavaScript dialogs (an ``alert`` that ran), requests that left the
page (network fetches), facts evaluated in the page, and a PNG screenshot.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def find() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


@dataclass
class Visit:
    console: List[dict] = field(default_factory=list)
    exceptions: List[dict] = field(default_factory=list)
    dialogs: List[dict] = field(default_factory=list)
    requests: List[str] = field(default_factory=list)
    log: List[dict] = field(default_factory=list)
    facts: Dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""

    def errors(self) -> List[str]:
        """Console errors, uncaught exceptions and error log entries, as text."""
        out = [f"console.{m.get('type')}: {json.dumps(m.get('args'))[:300]}" for m in self.console if m.get("type") in ("error", "assert")]
        out += [f"exception: {json.dumps(e)[:300]}" for e in self.exceptions]
        out += [f"log {e.get('source')}: {e.get('text')}" for e in self.log if e.get("level") == "error"]
        return out


class _Pipe:
    def __init__(self, proc: subprocess.Popen, wfd: int, rfd: int):
        self.proc, self.wfd, self.rfd = proc, wfd, rfd
        self.msgs: "queue.Queue[dict]" = queue.Queue()
        self.next_id = 0
        self.events: List[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self.rfd, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                try:
                    self.msgs.put(json.loads(raw))
                except ValueError:
                    pass
        self.msgs.put({"closed": True})

    def send(self, method: str, params: Optional[dict] = None, session: Optional[str] = None) -> int:
        self.next_id += 1
        msg: dict = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None, timeout: float = 30.0) -> dict:
        i = self.send(method, params, session)
        return self.wait(lambda m: m.get("id") == i, timeout, what=method)

    def wait(self, pred, timeout: float, what: str) -> dict:
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"chromium: no answer to {what} within {timeout:.0f} s")
            try:
                m = self.msgs.get(timeout=left)
            except queue.Empty:
                continue
            if m.get("closed"):
                raise RuntimeError(f"chromium exited while waiting for {what} (exit code {self.proc.poll()})")
            if "id" not in m:
                self.events.append(m)
                if m.get("method") == "Page.javascriptDialogOpening":
                    # An alert() ran: note it (the caller sees it in the events) and dismiss it,
                    # or the page would stay blocked.
                    self.send("Page.handleJavaScriptDialog", {"accept": True}, m.get("sessionId"))
            if pred(m):
                if "error" in m:
                    raise RuntimeError(f"chromium: {what} failed: {m['error']}")
                return m


EVAL_FACTS = """JSON.stringify({
  title: document.title,
  h1: (document.querySelector('h1') || {}).textContent || null,
  scripts: document.scripts.length,
  images: Array.from(document.images).map(i => ({ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth})),
  text: document.body ? document.body.innerText : '',
  height: document.documentElement.scrollHeight,
})"""


def open_page(path: Path, width: int = 1200, height: int = 1500, timeout: float = 60.0) -> Visit:
    """Loads ``path`` in headless Chromium; returns a :class:`Visit`."""
    exe = find()
    if exe is None:
        raise FileNotFoundError("chromium")
    profile = tempfile.mkdtemp(prefix="braid-chromium-")
    import fcntl

    def high(fd: int) -> int:
        # Above 9, so the redirections to 3 and 4 below cannot close one of them.
        h = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
        os.close(fd)
        return h

    to_chrome_r, to_chrome_w = map(high, os.pipe())
    from_chrome_r, from_chrome_w = map(high, os.pipe())
    # Chromium reads commands on fd 3 and writes replies on fd 4.
    sh = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w} {to_chrome_r}<&- {from_chrome_w}>&-'
    args = FLAGS + [f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"]
    proc = subprocess.Popen(["bash", "-c", sh, exe, *args], pass_fds=(to_chrome_r, from_chrome_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    pipe = _Pipe(proc, to_chrome_w, from_chrome_r)
    v = Visit()
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["result"]["targetId"]
        sess = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["result"]["sessionId"]
        for m in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            pipe.call(m, session=sess)
        pipe.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=sess)
        start = len(pipe.events)
        pipe.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=sess)
        pipe.wait(lambda m: m.get("method") == "Page.loadEventFired", timeout, what="the page's load event")
        # Anything the page does right after load (it should do nothing).
        time.sleep(0.3)
        r = pipe.call("Runtime.evaluate", {"expression": EVAL_FACTS, "returnByValue": True}, session=sess)
        v.facts = json.loads(r["result"]["result"]["value"])
        shot = pipe.call("Page.captureScreenshot", {"format": "png"}, session=sess)
        import base64

        v.screenshot = base64.b64decode(shot["result"]["data"])
        # Drain what arrived meanwhile.
        while not pipe.msgs.empty():
            m = pipe.msgs.get_nowait()
            if "id" not in m and not m.get("closed"):
                pipe.events.append(m)
        for e in pipe.events[start:]:
            meth, p = e.get("method"), e.get("params", {})
            if meth == "Runtime.consoleAPICalled":
                v.console.append({"type": p.get("type"), "args": [a.get("value", a.get("description")) for a in p.get("args", [])]})
            elif meth == "Runtime.exceptionThrown":
                v.exceptions.append(p.get("exceptionDetails", {}))
            elif meth == "Log.entryAdded":
                v.log.append(p.get("entry", {}))
            elif meth == "Page.javascriptDialogOpening":
                v.dialogs.append({"type": p.get("type"), "message": p.get("message")})
            elif meth == "Network.requestWillBeSent":
                url = p.get("request", {}).get("url", "")
                if not url.startswith(("data:", "file:", "about:")):
                    v.requests.append(url)
        try:
            pipe.send("Browser.close")
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - killed below
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        shutil.rmtree(profile, ignore_errors=True)
    return v
