#!/usr/bin/env python3
"""Drives headless Chromium through a vault share link page, for the tests. Stdlib only.

    browser.py --url URL [--click] [--password PW] [--download-dir DIR]
               [--screenshot FILE.png] [--width W --height H] [--timeout 30] [--chromium PATH]

It talks the Chrome DevTools Protocol over --remote-debugging-pipe (Chromium reads commands on
its fd 3 and writes answers and events on its fd 4, each message JSON ended by a NUL byte). It:
  - records the URL of every request the page makes (Network.requestWillBeSent);
  - opens URL and waits until <main id="app" data-state> leaves "loading";
  - with --click, when the page is "ready": types --password (if given) into #password, clicks
    #reveal and waits until the state leaves "revealing" (another state at load: no click);
  - with --download-dir: when the page shows #download, clicks it and waits for the download
    to complete into DIR (saved under the name the page suggests);
  - with --screenshot: saves a PNG of the viewport (--width/--height set the viewport, as a
    phone when the width is under 600).
Then it prints one JSON object:
  {"state", "message", "details" ({"views", "expires"}: the texts of the views left and the
   expiry the page shows before Reveal, or null when it shows none), "secret" (text of #secret
   or null), "download" (suggested file name or null), "requests": [urls], "location":
   location.href at the end,
   "errors": [console errors, uncaught exceptions and CSP violations, as text]}
It exits 2 with a message on stderr when Chromium fails or something times out, and always
kills Chromium and removes its temporary profile.
"""
import argparse
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Runs in the child between fork and Chromium: moves the two pipe ends to fds 3 and 4, where
# --remote-debugging-pipe expects them. The ends are passed above fd 9, so nothing is clobbered.
TRAMPOLINE = (
    "import os,sys\n"
    "r,w=int(sys.argv[1]),int(sys.argv[2])\n"
    "os.dup2(r,3);os.dup2(w,4);os.close(r);os.close(w)\n"
    "os.execvp(sys.argv[3],sys.argv[3:])\n"
)

# Keep Chromium from talking to anything but the page's own server.
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--no-default-browser-check", "--remote-debugging-pipe",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--disable-breakpad",
    "--disable-client-side-phishing-detection", "--disable-domain-reliability",
    "--no-pings", "--metrics-recording-only", "--mute-audio", "--password-store=basic",
    "--use-mock-keychain", "--disable-features=Translate,MediaRouter,OptimizationHints",
    # Only loopback names resolve: a stray request elsewhere fails instead of leaving the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE [::1]",
]



def ready(fd, event, seconds):
    """Whether `fd` is ready for `event` (POLLIN or POLLOUT, or has hung up) within `seconds`.
    poll, not select: select() takes no descriptor above 1023, and a swift test process
    that holds many connections at once (RelayAbuseTests' 2,000 slow ones) starts this
    script with descriptors numbered above that."""
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(max(0.0, seconds) * 1000))

class Failure(Exception):
    pass


class ProtocolError(Failure):
    """Chromium answered a command with an error (e.g. no page context while navigating)."""


class Chromium:
    def __init__(self, binary, deadline):
        self.deadline = deadline
        self.profile = tempfile.mkdtemp(prefix="vault-browser-")
        self.log = tempfile.TemporaryFile()
        self.proc = None
        self.next_id = 0
        self.buffer = b""
        self.events = []       # (method, params, sessionId) not yet looked at
        self.listeners = []    # functions called with every event as it arrives
        self.page_errors = []  # console errors, exceptions, CSP violations (filled by drive)
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        child_r = _high(cmd_r)
        child_w = _high(res_w)
        self.to_chrome, self.from_chrome = cmd_w, res_r
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", TRAMPOLINE, str(child_r), str(child_w),
                 binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                pass_fds=(child_r, child_w), start_new_session=True)
        except OSError as exc:
            raise Failure(f"cannot start {binary}: {exc}") from exc
        finally:
            for fd in (cmd_r, res_w, child_r, child_w):
                os.close(fd)

    def close(self):
        """Stops Chromium and all its helpers and removes the profile, whatever happened."""
        if self.proc is not None and self.proc.poll() is None:
            try:  # ask nicely first (best effort: the deadline may already have passed)
                os.set_blocking(self.to_chrome, False)
                os.write(self.to_chrome, json.dumps({"id": 0, "method": "Browser.close"}).encode()
                         + b"\0")
                self.proc.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc is not None:
            # Chromium's helpers (zygotes, renderers, utilities) share its process group, which
            # start_new_session made the leader's own: kill the group, then wait for it to go.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            until = time.monotonic() + 3
            while time.monotonic() < until and _group_alive(self.proc.pid):
                time.sleep(0.05)
        for fd in (self.to_chrome, self.from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        for _ in range(3):
            shutil.rmtree(self.profile, ignore_errors=True)
            if not os.path.exists(self.profile):
                break
            time.sleep(0.2)

    def chromium_log(self):
        self.log.seek(0)
        lines = self.log.read().decode("utf-8", "replace").splitlines()
        # Without a D-Bus (as in CI) Chromium complains about it at length: not the problem.
        return "\n".join(line for line in lines if "dbus" not in line.lower())[-3000:]

    # -- protocol ------------------------------------------------------------------------------

    def _write(self, message):
        data = json.dumps(message).encode() + b"\0"
        while data:
            writable = ready(self.to_chrome, select.POLLOUT, self._left())
            if not writable:
                raise Failure("timed out writing to Chromium")
            data = data[os.write(self.to_chrome, data):]

    def _left(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Failure("timed out")
        return left

    def _read_one(self, until):
        """Reads one message, waiting at most until the monotonic time `until`; None if none."""
        while b"\0" not in self.buffer:
            wait = min(until, self.deadline) - time.monotonic()
            if wait <= 0:
                if time.monotonic() >= self.deadline:
                    raise Failure("timed out")
                return None
            readable = ready(self.from_chrome, select.POLLIN, wait)
            if not readable:
                continue
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                raise Failure("Chromium closed the DevTools pipe (it exited?)")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def _dispatch(self, message):
        event = (message["method"], message.get("params", {}), message.get("sessionId"))
        for listener in self.listeners:
            listener(*event)
        self.events.append(event)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._write(message)
        while True:
            answer = self._read_one(self.deadline)
            if "id" not in answer:
                self._dispatch(answer)
            elif answer["id"] == self.next_id:
                if "error" in answer:
                    raise ProtocolError(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})

    def pump(self, seconds):
        """Handles events for up to `seconds`."""
        until = time.monotonic() + seconds
        while True:
            message = self._read_one(until)
            if message is None:
                return
            if "id" not in message:
                self._dispatch(message)

    def wait_event(self, predicate, what):
        while True:
            for event in self.events:
                if predicate(*event):
                    self.events.remove(event)
                    return event
            message = self._read_one(self.deadline)
            if message is None:
                raise Failure(f"timed out waiting for {what}")
            if "id" not in message:
                self._dispatch(message)


def _group_alive(pgid):
    """Whether a process of the group is still running (zombies waiting for a reaper don't
    count: they hold no files)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _high(fd):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)


def find_chromium(explicit):
    for name in ([explicit] if explicit else
                 [os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"]):
        if name and shutil.which(name):
            return shutil.which(name)
    raise Failure("Chromium not found (install the chromium package or pass --chromium)")


class Page:
    def __init__(self, browser, session):
        self.browser = browser
        self.session = session

    def send(self, method, params=None):
        return self.browser.send(method, params, self.session)

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise ProtocolError(f"page script failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def state(self):
        return self.evaluate(
            "(() => { const a = document.getElementById('app');"
            " return a && document.readyState !== 'loading' ? a.dataset.state : null; })()")

    def wait_state(self, leave):
        """Polls data-state until it is set and not in `leave`; returns it."""
        state = None
        try:
            while True:
                try:
                    state = self.state()
                except ProtocolError:
                    state = None  # between two documents: no context to evaluate in yet
                if state is not None and state not in leave:
                    return state
                self.browser.pump(0.05)
        except Failure as exc:
            if isinstance(exc, ProtocolError) or "timed out" not in str(exc):
                raise
            shown = "no <main id=app> yet" if state is None else f"data-state={state!r}"
            raise Failure(f"timed out waiting for the page to leave {'/'.join(sorted(leave))} "
                          f"({shown})") from None

    def click(self, selector):
        """A real mouse click in the middle of the element (scrolled into view first)."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return {x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width}; })()")
        if box is None or not box["w"]:
            raise Failure(f"no visible {selector} on the page")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params = {"type": kind, "x": box["x"], "y": box["y"]}
            if kind != "mouseMoved":
                params.update(button="left", clickCount=1)
            self.send("Input.dispatchMouseEvent", params)


def run(args):
    deadline = time.monotonic() + args.timeout
    browser = Chromium(find_chromium(args.chromium), deadline)
    try:
        return drive(browser, args)
    except Failure as exc:
        log = browser.chromium_log().strip()
        errors = "".join(f"\n  {e}" for e in browser.page_errors)
        raise Failure(f"{exc}" + (f"\n--- the page's errors ---{errors}" if errors else "")
                      + (f"\n--- Chromium's output (end) ---\n{log}" if log else ""))
    finally:
        browser.close()


def drive(browser, args):
    requests = []
    errors = browser.page_errors
    download = {}

    def on_event(method, params, session):
        if method == "Network.requestWillBeSent":
            requests.append(params["request"]["url"])
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            # Includes Content-Security-Policy violations and failed loads.
            errors.append(params["entry"].get("text", ""))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(details.get("exception", {}).get("description") or details.get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                   for a in params.get("args", [])))
        elif method == "Browser.downloadWillBegin":
            download["name"] = params.get("suggestedFilename")

    browser.listeners.append(on_event)
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget",
                           {"targetId": target, "flatten": True})["sessionId"]
    page = Page(browser, session)
    page.send("Network.enable")
    page.send("Page.enable")
    page.send("Runtime.enable")
    page.send("Log.enable")
    if args.width or args.height:
        page.send("Emulation.setDeviceMetricsOverride", {
            "width": args.width or 1280, "height": args.height or 800,
            "deviceScaleFactor": 1, "mobile": bool(args.width and args.width < 600)})
    if args.download_dir:
        os.makedirs(args.download_dir, exist_ok=True)
        browser.send("Browser.setDownloadBehavior", {
            "behavior": "allow", "downloadPath": os.path.abspath(args.download_dir),
            "eventsEnabled": True})

    navigation = page.send("Page.navigate", {"url": args.url})
    if navigation.get("errorText"):
        raise Failure(f"cannot open {args.url}: {navigation['errorText']}")
    state = page.wait_state({"loading"})

    # The click only makes sense on a page that offers it: a link that is gone or damaged at
    # load shows no #reveal, and the result is simply that state.
    if args.click and state == "ready":
        if args.password is not None:
            if not page.evaluate("!!document.getElementById('password')"):
                raise Failure(f"the page has no #password field (state {state})")
            page.evaluate("document.getElementById('password').focus()")
            page.send("Input.insertText", {"text": args.password})
        page.click("#reveal")
        state = page.wait_state({"loading", "revealing"})

    if args.download_dir and page.evaluate("!!document.getElementById('download')"):
        page.click("#download")
        progress = browser.wait_event(
            lambda m, p, s: m == "Browser.downloadProgress" and p.get("state") != "inProgress",
            "the download")
        if progress[1].get("state") != "completed":
            raise Failure(f"the download ended as {progress[1].get('state')}")

    if args.screenshot:
        browser.pump(0.2)  # let the last layout settle
        shot = page.send("Page.captureScreenshot", {"format": "png"})
        with open(args.screenshot, "wb") as out:
            out.write(base64.b64decode(shot["data"]))

    browser.pump(0.1)  # collect any request events still in flight
    facts = page.evaluate(
        "(() => { const t = (id) => { const e = document.getElementById(id);"
        " return e ? e.textContent : null; };"
        " const d = document.getElementById('details');"
        " return {state: document.getElementById('app').dataset.state,"
        " message: t('message'), secret: t('secret'), location: location.href,"
        " details: d && !d.hidden ? {views: t('views-left'), expires: t('expires')} : null}; })()")
    return {
        "state": facts["state"],
        "message": facts["message"],
        "details": facts["details"],
        "secret": facts["secret"],
        "download": download.get("name"),
        "requests": requests,
        "location": facts["location"],
        "errors": errors,
    }


def main():
    parser = argparse.ArgumentParser(description="Drive headless Chromium through a share link.")
    parser.add_argument("--url", required=True)
    parser.add_argument("--click", action="store_true", help="click #reveal")
    parser.add_argument("--password", help="typed into #password before the click")
    parser.add_argument("--download-dir", help="click #download and save the file here")
    parser.add_argument("--screenshot", help="save a PNG of the viewport here")
    parser.add_argument("--width", type=int)
    parser.add_argument("--height", type=int)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds for everything")
    parser.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    args = parser.parse_args()
    if args.password is not None and not args.click:
        parser.error("--password needs --click")

    # A SIGTERM (a test harness giving up) still cleans up Chromium and the profile.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        result = run(args)
    except Failure as exc:
        print(f"browser.py: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
