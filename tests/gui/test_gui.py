#!/usr/bin/python3
"""`kopiru gui` in a real browser (Debian's Chromium, headless, through
Selenium and chromedriver) and its security as raw HTTP. Run as root by
tests/gui/run.sh, which installs what it needs:

    test_gui.py --kopiru BIN [--axe axe.min.js] [--screenshot PNG] [--modes root,user]

Two rounds: the server as root (the helper a plain child), and as an
ordinary user whose helper is started through `sudo -n` (a sudoers rule
made here and removed after, standing in for pkexec). In each: an xz
image from a file and from a URL onto two loop devices at once; cancel
mid-way; a wrong SHA-256 and an HTML "image"; a mounted target; a backup;
keyboard only; axe-core over each screen. Controls are found by their
accessible names, as a screen reader finds them. Ends with one line:
N passed, N failed, N skipped."""

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
from lib import ROOT, by_name, request, header, sh, wait_for  # noqa: E402

RESULTS = []  # (name, "pass" | "fail" | "skip", detail)
ONLY = None  # --only: run only the tests whose name has this in it


def record(name, status, detail=""):
    RESULTS.append((name, status, detail))
    mark = {"pass": "ok", "fail": "FAILED", "skip": "!!! SKIPPED"}[status]
    print(f"{mark}: {name}{': ' + detail if detail else ''}", flush=True)


def run(name, f, *a):
    if ONLY and ONLY not in name:
        return True
    t = time.monotonic()
    try:
        f(*a)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        detail = f"{type(e).__name__}: {e}"
        record(name, "fail", detail)
        traceback.print_exc()
        return False
    record(name, "pass", f"{time.monotonic() - t:.1f} s")
    return True


# ---- the fixtures -------------------------------------------------------------

MIB = 1 << 20


class Files:
    """The images, served on 127.0.0.1 too (http_server.py)."""

    def __init__(self):
        self.dir = os.path.join(ROOT, "data")
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(ROOT, 0o755)
        os.chmod(self.dir, 0o755)
        # 12 MiB of bytes that compress a little, with an MBR signature.
        seed = hashlib.sha256(b"kopiru gui").digest()
        blocks = []
        for i in range(12 * 16):
            blocks.append(hashlib.sha256(seed + i.to_bytes(4, "big")).digest() * 2048)
        data = bytearray(b"".join(blocks))
        data[510:512] = b"\x55\xaa"
        self.raw = bytes(data)
        self.raw_path = self.put("os.img", self.raw)
        sh("xz", "-T1", "-0", "-k", "-f", self.raw_path)
        self.xz_path = self.raw_path + ".xz"
        self.xz_sha = hashlib.sha256(open(self.xz_path, "rb").read()).hexdigest()
        with open(os.path.join(self.dir, "SHA256SUMS"), "w") as f:
            f.write(f"{self.xz_sha}  os.img.xz\n")
        self.put("page.img.xz", b"<!DOCTYPE html><html><body>404 Not Found</body></html>\n" * 40)
        # A larger raw image for the cancel test, sent slowly.
        self.slow_path = self.put("slow.img", bytes(data) * 2)
        self.log = os.path.join(ROOT, "http.log")
        server = os.path.join(lib.HERE, "..", "..", "crates/kopiru-cli/tests/fs/http_server.py")
        self.http = subprocess.Popen([sys.executable, server, self.dir, self.log],
                                     stdout=subprocess.PIPE, text=True)
        self.http_port = int(self.http.stdout.readline())
        self.base = f"http://127.0.0.1:{self.http_port}"

    def put(self, name, data):
        p = os.path.join(self.dir, name)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o644)
        return p

    def close(self):
        self.http.kill()
        self.http.wait()


class Round:
    """One round: a server (as root or as the test user), a browser on
    it, three loop devices."""

    def __init__(self, args, files, as_user):
        self.args, self.files, self.as_user = args, files, as_user
        self.tag = "user" if as_user else "root"
        self.loops = [lib.Loop(f"{self.tag}{i}", 32) for i in range(3)]
        self.server = lib.Server(args.kopiru, as_user=as_user, elevate="sudo")
        self.home = lib.pwd.getpwnam(lib.USER).pw_dir if as_user else os.environ.get("HOME", "/root")
        profile = os.path.join(ROOT, f"chromium-{self.tag}")
        shutil.rmtree(profile, ignore_errors=True)
        self.driver = lib.browser(profile)
        self.driver.get(self.server.url)
        wait_for("the page", lambda: self.driver.current_url.rstrip("/").endswith(str(self.server.port)), 20)
        wait_for("the event stream", lambda: "Connected" in self.driver.find_element("id", "connection").text, 20)
        # The browser's session cookie, for requests made beside it.
        c = next(c for c in self.driver.get_cookies() if c["name"] == "kopiru_session")
        self.server.cookie = f"kopiru_session={c['value']}"
        self.seen = 0

    def close(self):
        try:
            self.driver.quit()
        except Exception:  # noqa: BLE001
            pass
        code = self.server.stop()
        for lo in self.loops:
            lo.close()
        return code

    # -- the page, by accessible names --

    def field(self, name):
        return by_name(self.driver, "textbox", name)

    def set_field(self, name, text):
        f = self.field(name)
        f.clear()
        f.send_keys(text)

    def show_all(self, on=True):
        s = by_name(self.driver, "switch", "Show all drives")
        if s.is_selected() != on:
            s.click()

    def tick(self, devs):
        """Ticks exactly these devices (their checkboxes' names start with
        the device's path), unticking the others."""
        self.show_all()
        for lo in self.loops:
            box = by_name(self.driver, "checkbox", lo.dev + " ", prefix=True)
            if box.is_enabled() and box.is_selected() != (lo.dev in devs):
                box.click()

    def results(self):
        return [p.text for p in self.driver.find_elements("css selector", "#results p:not(.hint)")]

    def mark(self):
        """Announcements from now on are the next action's."""
        self.seen = len(self.results())

    def last_job_id(self):
        jobs = self.server.state()["jobs"]
        return max((j["id"] for j in jobs), default=0)

    def flash(self, image, devs, sha=""):
        """Fills the form, clicks Flash and confirms; returns the job."""
        self.mark()
        before = self.last_job_id()
        self.set_field("Image", image)
        self.set_field("SHA-256", sha)
        self.tick(devs)
        by_name(self.driver, "button", "Flash").click()
        by_name(self.driver, "button", "Erase and flash").click()
        return wait_for("the flash to start", lambda: (lambda i: i if i > before else None)(self.last_job_id()), 20)

    def outcome(self, dev, job_id, timeout=120):
        """The page's announcement for `dev` in job `job_id` (the live
        region's line), once the job ended."""
        job = self.server.wait_job(job_id, timeout)
        said = wait_for(f"the result of {dev} announced",
                        lambda: [r for r in self.results()[self.seen:] if r.startswith(dev + ":")], 20)
        return job, said[-1]


def equal_to_image(loop, raw):
    got = loop.read(len(raw))
    assert got == raw, f"{loop.dev} differs from the image (first difference at byte " \
        f"{next(i for i in range(len(raw)) if got[i] != raw[i])})"


# ---- the browser tests ----------------------------------------------------------


def t_flash_file(r):
    a, b = r.loops[0], r.loops[1]
    a.fill(0xAA)
    b.fill(0xBB)
    job = r.flash(r.files.xz_path, [a.dev, b.dev])
    for lo in (a, b):
        j, said = r.outcome(lo.dev, job)
        assert "written and verified; safe to remove" in said, said
        equal_to_image(lo, r.files.raw)
    bars = lib.all_by_role(r.driver, "progressbar")
    ours = [x for x in bars if x.accessible_name.startswith((a.dev, b.dev))]
    assert len(ours) >= 2, f"{len(ours)} progress bars for the two cards"
    assert all(x.get_attribute("aria-valuenow") == "100" for x in ours[:2]), \
        [x.get_attribute("aria-valuenow") for x in ours]
    assert j["result"]["summary"]["sha256"] == hashlib.sha256(r.files.raw).hexdigest()
    # "Flashing ...: see the progress below" goes once the flash has ended.
    wait_for("the action message cleared after the flash",
             lambda: r.driver.find_element("id", "action-message").text == "", 10)


def t_flash_url(r):
    a, b = r.loops[0], r.loops[1]
    a.fill(0x11)
    b.fill(0x22)
    # The SHA-256 read from the SHA256SUMS beside the image's URL.
    url = r.files.base + "/os.img.xz"
    r.set_field("Image", url)
    r.driver.find_element("css selector", "details summary").click()
    by_name(r.driver, "button", "Read SHA-256").click()
    wait_for("the SHA-256 from SHA256SUMS",
             lambda: r.field("SHA-256").get_attribute("value") == r.files.xz_sha, 20)
    job = r.flash(url, [a.dev, b.dev], sha=r.files.xz_sha)
    for lo in (a, b):
        j, said = r.outcome(lo.dev, job)
        assert "written and verified" in said, said
        equal_to_image(lo, r.files.raw)
    s = j["result"]["summary"]
    assert s["downloaded_bytes"] == os.path.getsize(r.files.xz_path), s


def only_helper_as_root(r):
    """The server is the user's, wholly; under it, only sudo (which
    started it) and `kopiru gui-helper flash` run as root."""
    uid = lib.pwd.getpwnam(lib.USER).pw_uid
    assert lib.uids(r.server.pid) == [uid] * 4, lib.uids(r.server.pid)
    tree = lib.descendants(r.server.pid)
    as_root = [cmd for _, ids, cmd in tree if 0 in ids]
    for cmd in as_root:
        helper = len(cmd) > 2 and cmd[1:3] == ["gui-helper", "flash"]
        assert helper or os.path.basename(cmd[0]) == "sudo", f"running as root: {cmd}"
    assert any(len(c) > 2 and c[1:3] == ["gui-helper", "flash"] for c in as_root), \
        f"no helper running as root under the server: {tree}"


def t_cancel(r):
    a = r.loops[2]
    a.fill(0x5A)
    before = a.read(MIB)
    # 24 MiB raw at 2 MiB/s: about 12 s unless cancelled.
    url = r.files.base + "/slow.img?fault=rate=2048"
    job = r.flash(url, [a.dev])
    try:
        wait_for("some bytes written", lambda: r.server.job(job)["done"] >= 2 * MIB
                 or not r.server.job(job)["running"], 30)
        assert r.server.job(job)["running"], "it ended before it could be cancelled"
    except AssertionError as e:
        raise AssertionError(f"{e}: {json.dumps(r.server.job(job))[:1500]}") from None
    detail = wait_for("the download shown", lambda: [
        e.text for e in r.driver.find_elements("css selector", f"#job-{job} .detail")
        if "downloaded" in e.text], 10)[0]
    assert "Writing:" in detail and "of 24.0 MiB" in detail, detail
    if r.as_user:
        # Checked here, while a flash runs: a result of its own.
        run(f"{r.tag}: nothing runs as root but the helper that writes", only_helper_as_root, r)
    by_name(r.driver, "button", "Cancel").click()
    j, said = r.outcome(a.dev, job, 60)
    assert "cancelled" in said and "first MiB is as it was" in said, said
    assert j["result"]["summary"]["cancelled"] is True
    assert a.read(MIB) == before, "the first MiB changed after a cancel"
    assert j["elapsed"] < 10, f"the cancel took until {j['elapsed']:.1f} s"


def t_wrong_sha(r):
    a = r.loops[2]
    a.fill(0x77)
    before = a.sha()
    job = r.flash(r.files.xz_path, [a.dev], sha="0" * 64)
    j, said = r.outcome(a.dev, job)
    assert "nothing written" in said and "SHA-256" in said, said
    assert a.sha() == before, "a wrong SHA-256 wrote to the device"


def t_html_image(r):
    a = r.loops[2]
    a.fill(0x78)
    before = a.sha()
    job = r.flash(os.path.join(r.files.dir, "page.img.xz"), [a.dev])
    j, said = r.outcome(a.dev, job)
    assert "nothing written" in said and "HTML" in said, said
    assert a.sha() == before, "an HTML page was written to the device"


def t_mounted(r):
    a = r.loops[2]
    mnt = os.path.join(ROOT, f"mnt-{r.tag}")
    a.mount(mnt)
    try:
        r.show_all()
        box = wait_for("the mounted drive shown as unavailable",
                       lambda: (lambda e: e if not e.is_enabled() else None)(
                           by_name(r.driver, "checkbox", a.dev + " ", prefix=True)), 10)
        name = box.accessible_name
        assert f"unavailable: mounted at {mnt}" in name, name
        before = a.sha()
        # Asked for directly, past the page: refused by the server...
        status, v = r.server.post("/api/flash", {"image": r.files.xz_path, "devices": [a.dev]})
        assert status == 409 and "mounted" in v["error"], (status, v)
        # ... and by the helper itself, which trusts no one.
        p = subprocess.run([r.args.kopiru, "gui-helper", "flash", r.files.xz_path, a.dev],
                           input="", capture_output=True, text=True, timeout=60)
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        refusal = [x for x in lines if x["event"] == "refused"]
        assert p.returncode == 2 and refusal and "is mounted" in refusal[0]["message"], p.stdout
        assert a.sha() == before
    finally:
        sh("umount", mnt)
        a.mounted = None


def t_hotplug(r):
    """A drive plugged in shows up, and goes when pulled out, without a
    reload."""
    r.show_all()
    lo = lib.Loop(f"{r.tag}hot", 16)
    try:
        # Available once listed: a new loop device has nothing mounted.
        by_name(r.driver, "checkbox", lo.dev + " ", prefix=True, timeout=10, enabled=True)
    finally:
        lo.close()
    wait_for(f"{lo.dev} gone from the list", lambda: not [
        n for n in lib.names(r.driver, "checkbox") if n.startswith(lo.dev + " ")], 10)


def t_backup(r):
    a = r.loops[1]  # holds the image from the flashes
    a.fill(0)
    with open(a.dev, "r+b") as f:
        f.write(r.files.raw)
        os.fsync(f.fileno())
    want = a.read()
    out = os.path.join(r.home, f"backup-{r.tag}-{os.getpid()}.img.zst")
    r.tick([a.dev])
    r.set_field("Back up to", out)
    r.mark()
    before = r.last_job_id()
    by_name(r.driver, "button", "Back up").click()
    try:
        job = wait_for("the backup to start", lambda: (lambda i: i if i > before else None)(r.last_job_id()), 20)
    except AssertionError as e:
        msg = r.driver.find_element("id", "action-message").text
        raise AssertionError(f"{e}: the page says {msg!r}") from None
    j, said = r.outcome(a.dev, job)
    assert "backed up into" in said and "verified" in said, said
    got = subprocess.run(["zstd", "-dc", out], capture_output=True, check=True).stdout
    assert got == want, "the backup, decompressed, is not the device"
    assert os.path.isfile(out + ".bmap"), "no block map beside the backup"
    if r.as_user:
        st = os.stat(out)
        pw = lib.pwd.getpwnam(lib.USER)
        assert (st.st_uid, st.st_gid) == (pw.pw_uid, pw.pw_gid), f"owned by {st.st_uid}"
        assert os.stat(out + ".bmap").st_uid == pw.pw_uid
    os.unlink(out)
    os.unlink(out + ".bmap")


def t_keyboard(r):
    """A flash by keyboard only: Tab, Shift+Tab, Space and Enter, from the
    top of the page."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.common.action_chains import ActionChains
    a = r.loops[0]
    a.fill(0x33)
    d = r.driver
    d.get(f"http://127.0.0.1:{r.server.port}/")
    wait_for("the page", lambda: "Connected" in d.find_element("id", "connection").text, 20)

    def focus(role, name, prefix=False):
        for _ in range(200):
            e = d.switch_to.active_element
            try:
                if e.aria_role == role and (e.accessible_name == name or
                                            prefix and e.accessible_name.startswith(name)):
                    return e
            except Exception:  # noqa: BLE001
                pass
            ActionChains(d).send_keys(Keys.TAB).perform()
        raise AssertionError(f"Tab never reached the {role} {name!r}")

    keys = lambda *k: ActionChains(d).send_keys(*k).perform()  # noqa: E731
    focus("textbox", "Image")
    keys(r.files.xz_path)
    focus("switch", "Show all drives")
    if not d.switch_to.active_element.is_selected():
        keys(Keys.SPACE)
    focus("checkbox", a.dev + " ", prefix=True)
    keys(Keys.SPACE)
    r.mark()
    before = r.last_job_id()
    focus("button", "Flash")
    keys(Keys.ENTER)
    # The dialog opens on its safe choice; Tab to the other.
    wait_for("the dialog", lambda: d.find_element("id", "confirm").is_displayed(), 10)
    focus("button", "Erase and flash")
    keys(Keys.ENTER)
    job = wait_for("the flash to start", lambda: (lambda i: i if i > before else None)(r.last_job_id()), 20)
    j, said = r.outcome(a.dev, job)
    assert "written and verified" in said, said
    equal_to_image(a, r.files.raw)


def t_browse(r):
    """The file chooser lists the user's folder and puts the chosen file's
    path in "Image"."""
    d = r.driver
    r.set_field("Image", r.files.dir + "/")
    by_name(d, "button", "Browse…").click()
    f = by_name(d, "button", "os.img.xz", prefix=True)
    AXE.check(r, "file chooser")
    f.click()
    wait_for("the path in Image", lambda: r.field("Image").get_attribute("value") == r.files.xz_path, 10)


def t_catalog(r):
    """An OS list in Imager's format: choosing an entry fills Image and
    SHA-256, and the written image's SHA-256 is compared with the list's."""
    a = r.loops[0]
    a.fill(0x44)
    items = {"os_list": [{"name": "Test OS", "description": "for the tests",
                          "url": r.files.base + "/os.img.xz",
                          "image_download_sha256": r.files.xz_sha,
                          "extract_sha256": hashlib.sha256(r.files.raw).hexdigest(),
                          "release_date": "2026-11-27"}]}
    r.files.put("os_list.json", json.dumps(items).encode())
    d = r.driver
    d.get(f"http://127.0.0.1:{r.server.port}/")
    wait_for("the page", lambda: "Connected" in d.find_element("id", "connection").text, 20)
    d.find_element("css selector", "details summary").click()
    r.set_field("OS list", r.files.base + "/os_list.json")
    by_name(d, "button", "Load list").click()
    from selenium.webdriver.support.ui import Select
    sel = by_name(d, "combobox", "Operating system")
    try:
        wait_for("the list's entries", lambda: len(Select(sel).options) > 1, 10)
    except AssertionError as e:
        raise AssertionError(f"{e}: the page says {d.find_element('id', 'image-message').text!r}") from None
    Select(sel).select_by_index(1)
    wait_for("the image's URL", lambda: r.field("Image").get_attribute("value") == items["os_list"][0]["url"], 10)
    assert r.field("SHA-256").get_attribute("value") == r.files.xz_sha
    r.mark()
    before = r.last_job_id()
    r.tick([a.dev])
    by_name(d, "button", "Flash").click()
    by_name(d, "button", "Erase and flash").click()
    job = wait_for("the flash to start", lambda: (lambda i: i if i > before else None)(r.last_job_id()), 20)
    r.outcome(a.dev, job)
    text = wait_for("the SHA-256 line", lambda: [e.text for e in d.find_elements("css selector", f"#job-{job} .sha")], 10)
    assert "as the OS list gives it" in text[0], text


def screenshot(d, path, keep):
    """The whole page as it is, for the README; of the drives, only the
    test's own (`keep`: device paths) are in the picture, the test
    machine's others (other tests' loop devices) hidden."""
    d.execute_script("""
        for (const li of document.querySelectorAll("#drive-list li"))
            if (!arguments[0].includes(li.dataset.path)) li.style.display = "none";
        window.scrollTo(0, 0);""", keep)
    size = d.get_window_size()
    height = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1000, height + 120)
    time.sleep(0.5)
    d.save_screenshot(path)
    d.set_window_size(size["width"], size["height"])


class Axe:
    """axe-core over each screen; each a test of its own."""

    def __init__(self, source):
        self.source = source

    def check(self, r, screen):
        name = f"{r.tag}: axe-core, {screen}"
        if ONLY and ONLY not in name:
            return
        if not self.source:
            record(name, "skip", "axe-core not available (npm pack axe-core failed)")
            return
        try:
            bad = lib.axe(r.driver, self.source)
        except Exception as e:  # noqa: BLE001
            record(name, "fail", f"axe did not run: {e}")
            return
        if bad:
            record(name, "fail", json.dumps(bad))
        else:
            record(name, "pass")


AXE = Axe(None)


def browser_round(args, files, as_user):
    r = Round(args, files, as_user)
    t = r.tag
    try:
        AXE.check(r, "first screen")
        r.show_all()
        AXE.check(r, "all drives shown")
        run(f"{t}: flash an xz file to two cards at once", t_flash_file, r)
        AXE.check(r, "results")
        if args.screenshot and not as_user:
            screenshot(r.driver, args.screenshot, [lo.dev for lo in r.loops])
        run(f"{t}: flash an xz URL (SHA-256 from SHA256SUMS) to two cards", t_flash_url, r)
        run(f"{t}: cancel mid-way keeps the first MiB", t_cancel, r)
        run(f"{t}: a wrong SHA-256 writes nothing", t_wrong_sha, r)
        run(f"{t}: an HTML page as the image writes nothing", t_html_image, r)
        run(f"{t}: a mounted drive is not offered and refused through the API", t_mounted, r)
        run(f"{t}: a drive plugged in or out shows up without a reload", t_hotplug, r)
        run(f"{t}: back up a card and compare", t_backup, r)
        AXE.check(r, "after a backup")
        run(f"{t}: the file chooser", t_browse, r)
        run(f"{t}: flash by keyboard only", t_keyboard, r)
        by_name(r.driver, "button", "Flash")
        r.tick([r.loops[0].dev])
        r.set_field("Image", files.xz_path)
        by_name(r.driver, "button", "Flash").click()
        by_name(r.driver, "button", "Erase and flash")
        AXE.check(r, "the confirmation dialog")
        by_name(r.driver, "button", "Don't flash").click()
        run(f"{t}: an OS list (Imager's JSON)", t_catalog, r)
    finally:
        code = r.close()
    record(f"{t}: Ctrl-C stops the server (exit {code})", "pass" if code == 0 else "fail")


# ---- the security tests, as raw HTTP ------------------------------------------------


def security(args, files):
    s = lib.Server(args.kopiru)
    port = s.port
    token_path = s.url.split(str(port), 1)[1]
    token = token_path.split("=", 1)[1]

    def t_headers():
        st, h, _ = request(port, "GET", token_path, origin=None)
        assert st == 200, st
        cookie = header(h, "set-cookie")[0]
        for part in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert part in cookie, cookie
        s.cookie = cookie.split(";")[0]
        # The token is in the address: no Referer carries it anywhere (the
        # page loads nothing from elsewhere, and says so), and the answer
        # is not kept in a cache.
        assert header(h, "referrer-policy") == ["no-referrer"], h
        assert header(h, "cache-control") == ["no-store"], h
        st, h, body = request(port, "GET", "/", cookie=s.cookie, origin=None)
        assert st == 200 and b"<script src=\"/app.js\"" in body, st
        for name, want in (("referrer-policy", "no-referrer"), ("x-frame-options", "DENY"),
                           ("x-content-type-options", "nosniff"), ("cache-control", "no-store")):
            assert header(h, name) == [want], (name, header(h, name))
        csp = header(h, "content-security-policy")[0]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, csp
        assert b"<script>" not in body and b"onclick" not in body, "inline script in the page"
        for path in ("/", "/app.js", "/api/state", "/api/nothing"):
            st, h, _ = request(port, "GET", path, cookie=s.cookie, origin="http://evil.example")
            assert not [n for n, _ in h if n.startswith("access-control-")], (path, h)

    def t_loopback_only():
        import ipaddress
        addrs = lib.listening(port)
        assert addrs, f"nothing listening on {port}"
        assert all(a.is_loopback for a in addrs), addrs
        # And not reachable on this machine's other addresses.
        others = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
        for a in others:
            if ipaddress.ip_address(a.split("%")[0]).is_loopback:
                continue
            fam = lib.socket.AF_INET6 if ":" in a else lib.socket.AF_INET
            with lib.socket.socket(fam) as c:
                c.settimeout(3)
                assert c.connect_ex((a, port)) != 0, f"answers on {a}:{port}"

    def t_token_once():
        st, _, body = request(port, "GET", token_path, origin=None)
        assert st == 403 and b"used already" in body, (st, body)
        st, _, _ = request(port, "GET", "/?token=" + "0" * len(token), origin=None)
        assert st == 403, st

    def t_no_cookie():
        for method, path in (("GET", "/"), ("GET", "/app.js"), ("GET", "/api/state"),
                             ("GET", "/api/events"), ("GET", "/api/browse?dir=/etc")):
            st, _, body = request(port, method, path, origin=None)
            assert st in (401, 403), (path, st)
            assert b"root:" not in body
        st, _, _ = request(port, "POST", "/api/flash", body={"image": files.xz_path, "devices": ["/dev/loop0"]})
        assert st in (401, 403), st
        st, _, _ = request(port, "GET", "/", cookie="kopiru_session=" + "0" * 32, origin=None)
        assert st in (401, 403), st

    def t_wrong_host():
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1", f"127.0.0.2:{port}",
                     f"localhost.evil.example:{port}", f"127.0.0.1:{port + 1}"):
            st, _, _ = request(port, "GET", "/api/state", cookie=s.cookie, host=host, origin=None)
            assert st == 403, (host, st)
        st, _, _ = request(port, "GET", token_path, host="rebind.example", origin=None)
        assert st == 403, st
        st, _, _ = request(port, "GET", "/api/state", cookie=s.cookie, host=f"localhost:{port}", origin=None)
        assert st == 200, st

    def t_foreign_origin_write():
        a = lib.Loop("sec", 16)
        try:
            a.fill(0x99)
            before = a.sha()
            for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}", "null", None):
                st, _, _ = request(port, "POST", "/api/flash", cookie=s.cookie, origin=origin,
                                   body={"image": files.xz_path, "devices": [a.dev]})
                assert st == 403, (origin, st)
            st, _, _ = request(port, "POST", "/api/flash", cookie=s.cookie,
                               body={"image": files.xz_path, "devices": [a.dev]},
                               extra=["Sec-Fetch-Site: cross-site"])
            assert st == 403, st
            # A form's body (no preflight) is not taken either.
            st, _, _ = lib.raw(port, f"POST /api/flash HTTP/1.1\nHost: 127.0.0.1:{port}\n"
                                 f"Origin: http://127.0.0.1:{port}\nCookie: {s.cookie}\n"
                                 "Content-Type: text/plain\nContent-Length: 2\n\n", b"{}")
            assert st == 415, st
            time.sleep(1)
            assert s.state()["jobs"] == [], "a job was started"
            assert a.sha() == before
        finally:
            a.close()

    def t_foreign_origin_events():
        for origin, extra in (("http://evil.example", []), (None, ["Sec-Fetch-Site: cross-site"])):
            st, _, _ = request(port, "GET", "/api/events", cookie=s.cookie, origin=origin, extra=extra)
            assert st == 403, (origin, st)
        # Ours: the stream starts with the state.
        sock = lib.socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {s.cookie}\r\n"
                     f"Origin: http://127.0.0.1:{port}\r\n\r\n".encode())
        got = b""
        while b"\n\n" not in got.split(b"\r\n\r\n", 1)[-1] or b"data:" not in got:
            got += sock.recv(65536)
        sock.close()
        assert got.startswith(b"HTTP/1.1 200") and b"text/event-stream" in got, got[:200]

    def t_paths():
        for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2fetc%2fpasswd",
                     "/etc/passwd", "//etc/passwd", "/app.js/../../../etc/passwd", "/index.html/.."):
            st, _, body = request(port, "GET", path, cookie=s.cookie, origin=None)
            assert st == 404 and b"root:" not in body, (path, st)

    def t_malformed():
        st, _, _ = lib.raw(port, "GARBAGE\n")
        assert st == 400, st
        st, _, _ = lib.raw(port, f"POST /api/flash HTTP/1.1\nHost: 127.0.0.1:{port}\n"
                                 "Content-Length: 99999999\n")
        assert st == 413, st
        st, _, _ = lib.raw(port, f"GET /api/state HTTP/1.1\nHost: 127.0.0.1:{port}\n"
                                 f"Host: evil.example\nCookie: {s.cookie}\n")
        assert st == 403, st
        st, _, _ = lib.raw(port, f"POST /api/flash HTTP/1.1\nHost: 127.0.0.1:{port}\n"
                                 f"Origin: http://127.0.0.1:{port}\nCookie: {s.cookie}\n"
                                 "Content-Type: application/json\nTransfer-Encoding: chunked\n",
                           b"2\r\n{}\r\n0\r\n\r\n")
        assert st == 411, st

    try:
        run("security: cookie attributes, CSP without inline script, no CORS headers, "
            "no Referer for the token", t_headers)
        run("security: listening on the loopback address only", t_loopback_only)
        run("security: the token works once", t_token_once)
        run("security: no cookie, no answer", t_no_cookie)
        run("security: a wrong Host is refused (DNS rebinding)", t_wrong_host)
        run("security: a write from another Origin is refused, nothing written", t_foreign_origin_write)
        run("security: the event stream from another Origin is refused", t_foreign_origin_events)
        run("security: no path outside the page's files", t_paths)
        run("security: malformed requests", t_malformed)
    finally:
        s.stop()


def idle_exit(args):
    """The server exits a while after its last page closed."""
    s = lib.Server(args.kopiru, idle=2)
    s.sign_in()
    sock = lib.socket.create_connection(("127.0.0.1", s.port), timeout=10)
    sock.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\nCookie: {s.cookie}\r\n\r\n".encode())
    sock.recv(4096)
    time.sleep(3)
    assert s.proc.poll() is None, "exited while a page was open"
    sock.close()
    t = time.monotonic()
    code = s.proc.wait(30)
    assert code == 0, code
    assert time.monotonic() - t < 15, "too long after the page closed"


def no_elevation(args, files):
    """As a user, with an elevation command that is not installed: the
    page says why, and nothing is written."""
    for cmd in ("doas", "pkexec", "run0"):
        if not shutil.which(cmd):
            break
    else:
        record("user: no elevation command: refused", "skip", "doas, pkexec and run0 are all installed")
        return
    s = lib.Server(args.kopiru, as_user=True, elevate=cmd)
    a = lib.Loop("noelev", 16)
    try:
        s.sign_in()
        a.fill(0x66)
        before = a.sha()
        wait_for("the drive listed", lambda: any(d["path"] == a.dev for d in s.state()["drives"]), 10)
        st, v = s.post("/api/flash", {"image": files.xz_path, "devices": [a.dev]})
        assert st == 200, (st, v)
        j = s.wait_job(v["job"], 30)
        assert j["refused"] and f"through {cmd}" in j["refused"], j["refused"]
        assert a.sha() == before
    finally:
        a.close()
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kopiru", required=True)
    ap.add_argument("--axe")
    ap.add_argument("--screenshot")
    ap.add_argument("--modes", default="root,user")
    ap.add_argument("--only")
    args = ap.parse_args()
    global AXE, ONLY
    ONLY = args.only
    AXE = Axe(open(args.axe).read() if args.axe and os.path.exists(args.axe) else None)
    lib.cleanup_root()
    os.makedirs(ROOT)
    files = Files()
    rule = None
    t0 = time.monotonic()
    try:
        run("security and idle: the server exits after its last page closed", idle_exit, args)
        security(args, files)
        if "root" in args.modes:
            browser_round(args, files, False)
        if "user" in args.modes:
            lib.ensure_user()
            rule = lib.sudoers_rule(args.kopiru)
            run("user: no elevation command: refused, nothing written", no_elevation, args, files)
            browser_round(args, files, True)
    except Exception as e:  # noqa: BLE001
        record("gui tests", "fail", f"stopped early: {e}")
        traceback.print_exc()
    finally:
        if rule:
            os.unlink(rule)
        files.close()
    if not any(st == "fail" for _, st, _ in RESULTS):
        lib.cleanup_root()
    else:
        print(f"(kept {ROOT} for a look: the servers' logs are there)")
    print(f"gui tests took {time.monotonic() - t0:.0f} s")
    n = {k: sum(1 for _, s, _ in RESULTS if s == k) for k in ("pass", "fail", "skip")}
    print(f"{n['pass']} passed, {n['fail']} failed, {n['skip']} skipped")
    return 1 if n["fail"] else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
