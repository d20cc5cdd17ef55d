"""Headless Chromium over the DevTools protocol, for the HTML report's browser test.

Chromium speaks the protocol over a pipe (`--remote-debugging-pipe`: commands on fd 3, replies
and events on fd 4, each message JSON ended by a NUL byte), so no WebSocket client, driver or
browser-automation package is needed: the standard library and Debian's `chromium` suffice. A
library such as Playwright would bring its own browser build, which is exactly what the test
should not use. A tiny PNG reader checks the screenshot's pixels for the same reason.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]


class BrowserError(RuntimeError):
    pass


@dataclass
class PageLoad:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    boxes: list[dict[str, Any]] = field(default_factory=list)
    # A screenshot of the page clipped to each box, by the box's element id.
    shots: dict[str, bytes] = field(default_factory=dict)


class Chromium:
    def __init__(self, executable: str, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="ember-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._resp_r, resp_w = os.pipe()
        # Park the child's ends above 9 so the dup2 onto 3 and 4 can never clobber one another.
        hi_cmd = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
        hi_resp = fcntl.fcntl(resp_w, fcntl.F_DUPFD, 10)
        os.close(cmd_r)
        os.close(resp_w)

        def child_fds() -> None:
            os.dup2(hi_cmd, 3)
            os.dup2(hi_resp, 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile.name}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,
            pass_fds=(3, 4),
        )
        os.close(hi_cmd)
        os.close(hi_resp)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._resp_r)
        self.profile.cleanup()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._resp_r], [], [], left)
            if ready:
                chunk = os.read(self._resp_r, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium closed the DevTools pipe")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read_message(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def open(self, url: str, width: int = 1280, height: int = 900) -> Tab:
        """A fresh tab on url, loaded; it stays open until closed, for clicks and screenshots."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        tab = Tab(self, target, session, width, height)
        tab.metrics(width, height)
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired")
        return tab

    def load(self, url: str, selector: str, width: int = 1280, height: int = 900) -> PageLoad:
        """Open url in a fresh tab; the console errors, requests, boxes of selector, screenshot."""
        tab = self.open(url, width, height)
        try:
            load = PageLoad(boxes=tab.boxes(selector))
            for box in load.boxes:
                load.shots[box["id"]] = tab.shot(box)
            load.console_errors, load.requests = tab.console_errors(), tab.requests()
        finally:
            tab.close()
        return load


class Tab:
    """One page in Chromium, driven over the session the browser attached to it."""

    def __init__(self, browser: Chromium, target: str, session: str, width: int, height: int):
        self.browser, self.target, self.session = browser, target, session
        self.width, self.height = width, height

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def metrics(self, width: int, height: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def boxes(self, selector: str) -> list[dict[str, Any]]:
        """Each element of selector: its id and its box in page coordinates."""
        raw = self.evaluate(
            "JSON.stringify([...document.querySelectorAll(" + json.dumps(selector) + ")]"
            ".map(e => { const r = e.getBoundingClientRect(); return {id: e.id, "
            "x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height}; }))"
        )
        boxes: list[dict[str, Any]] = json.loads(raw)
        return boxes

    def shot(self, box: dict[str, Any]) -> bytes:
        clip = {"x": box["x"], "y": box["y"], "width": box["w"], "height": box["h"], "scale": 1}
        shot = self.send(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
        )
        return base64.b64decode(shot["data"])

    def element_shots(self, selector: str) -> dict[str, bytes]:
        """A screenshot of each element of selector, taken with the viewport as tall as the page
        so that nothing reflows between measuring a box and capturing it."""
        full = int(self.evaluate("document.documentElement.scrollHeight"))
        self.metrics(self.width, full)
        try:
            return {box["id"]: self.shot(box) for box in self.boxes(selector) if box["h"] > 0}
        finally:
            self.metrics(self.width, self.height)

    def click(self, selector: str) -> None:
        """A real left click (mouse pressed and released) at the middle of the element, after
        scrolling it into view, as a person would."""
        self.evaluate(
            f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'center'}})"
        )
        rect = json.loads(
            self.evaluate(
                f"JSON.stringify(document.querySelector({json.dumps(selector)}).getBoundingClientRect())"
            )
        )
        x, y = rect["left"] + rect["width"] / 2, rect["top"] + rect["height"] / 2
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def console_errors(self) -> list[str]:
        errors: list[str] = []
        for event in self.browser.events:
            if event.get("sessionId") not in (None, self.session):
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(json.dumps(params.get("args")))
            elif method == "Runtime.exceptionThrown":
                errors.append(json.dumps(params.get("exceptionDetails")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text", ""))
        return errors

    def requests(self) -> list[str]:
        return [
            event["params"]["request"]["url"]
            for event in self.browser.events
            if event.get("method") == "Network.requestWillBeSent"
            and event.get("sessionId") in (None, self.session)
        ]

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})


@dataclass
class Image:
    width: int
    height: int
    channels: int
    rows: list[bytes]

    def pixel(self, x: int, y: int) -> tuple[int, ...]:
        row = self.rows[y]
        return tuple(row[x * self.channels : x * self.channels + 3])


def read_png(data: bytes) -> Image:
    """8-bit RGB or RGBA, not interlaced: what Chromium's screenshots are."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}")
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return Image(width, height, channels, rows)
