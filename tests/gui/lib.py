"""What the tests of `kopiru gui` share: the server (started as root or as
an ordinary user), raw HTTP to it, loop devices, Debian's Chromium driven
by Selenium, and axe-core.

Needs root (loop devices, mount, a test user). Run by tests/gui/run.sh."""

import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = "/var/tmp/kopiru-gui-test"
USER = "kopiru-gui-test"


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout.strip()


def wait_for(what, check, timeout=60.0, every=0.1):
    """check() until it returns something true; its value, or an error
    naming `what` after `timeout` seconds."""
    end = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out ({timeout:.0f} s) waiting for {what}")
        time.sleep(every)


# ---- raw HTTP -----------------------------------------------------------


def raw(port, head, body=b"", timeout=10.0):
    """Sends `head` (a str, CRLF line ends added) and `body` as they are to
    127.0.0.1:port; returns (status, headers as a list of (lower name,
    value), body). The server closes every connection after answering."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    s.close()
    head_b, _, rest = data.partition(b"\r\n\r\n")
    lines = head_b.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = []
    for line in lines[1:]:
        n, _, v = line.partition(":")
        headers.append((n.strip().lower(), v.strip()))
    return status, headers, rest


def request(port, method, path, cookie=None, host=None, origin="ours", body=None, extra=()):
    """One request as a browser of this page would send it, each part
    replaceable: `host` (default 127.0.0.1:PORT), `origin` ("ours", None:
    no Origin header, or a value), `cookie` (the session's NAME=VALUE)."""
    host = host or f"127.0.0.1:{port}"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    if origin == "ours":
        origin = f"http://127.0.0.1:{port}"
    if origin:
        lines.append(f"Origin: {origin}")
    if cookie:
        lines.append(f"Cookie: {cookie}")
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    lines += list(extra)
    return raw(port, "\n".join(lines) + "\n", data)


def header(headers, name):
    return [v for n, v in headers if n == name]


def listening(port):
    """The local addresses of the TCP sockets listening on `port`, from
    /proc/net/tcp and tcp6 (state 0A), as ip_address objects."""
    import ipaddress
    out = []
    for name, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            addr, p = f[1].split(":")
            if f[3] != "0A" or int(p, 16) != port:
                continue
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(bytes.fromhex(addr[i:i + 8])[::-1] for i in range(0, len(addr), 8))
            out.append(ipaddress.ip_address(raw[:width]))
    return out


def uids(pid):
    """The real, effective, saved and filesystem uids of a process."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no Uid line for {pid}")


def descendants(pid):
    """(pid, uids, command line) of every process under `pid`."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
                parent[int(d)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for child, par in parent.items():
            if par == p:
                todo.append(child)
                try:
                    cmd = open(f"/proc/{child}/cmdline", "rb").read().split(b"\0")
                    out.append((child, uids(child), [c.decode(errors="replace") for c in cmd if c]))
                except (OSError, AssertionError):
                    continue  # ended meanwhile
    return out


# ---- the server -----------------------------------------------------------


class Server:
    """`kopiru gui --json --no-open`, as root or as USER (then through
    `--elevate`); its address from its one JSON line."""

    def __init__(self, kopiru, as_user=False, elevate="sudo", idle=120):
        cmd = [kopiru, "gui", "--json", "--no-open", "--idle-timeout", str(idle),
               "--elevate", elevate]
        env = dict(os.environ)
        if as_user:
            pw = pwd.getpwnam(USER)
            env.update(HOME=pw.pw_dir, USER=USER, LOGNAME=USER)
            cmd = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
                   "--init-groups", "--reset-env"] + cmd
            # setpriv --reset-env sets HOME and USER from the passwd entry.
        self.log = os.path.join(ROOT, f"server-{os.getpid()}-{time.monotonic_ns()}.log")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=open(self.log, "w"), env=env,
                                     cwd="/", text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("kopiru gui printed no address: " + open(self.log).read())
        info = json.loads(line)
        self.url, self.port, self.pid = info["url"], info["port"], info["pid"]
        self.cookie = None

    def sign_in(self):
        """Trades the token for the session cookie (as a browser does)."""
        token_path = self.url.split(str(self.port), 1)[1]
        status, headers, _ = request(self.port, "GET", token_path, origin=None)
        assert status == 200, f"token exchange: {status}"
        self.cookie = header(headers, "set-cookie")[0].split(";")[0]
        return self.cookie

    def get(self, path):
        status, _, body = request(self.port, "GET", path, cookie=self.cookie, origin=None)
        assert status == 200, f"GET {path}: {status} {body[:200]!r}"
        return json.loads(body)

    def post(self, path, body):
        status, _, data = request(self.port, "POST", path, cookie=self.cookie, body=body)
        return status, json.loads(data) if data.startswith(b"{") else data

    def state(self):
        return self.get("/api/state")

    def job(self, job_id):
        return next(j for j in self.state()["jobs"] if j["id"] == job_id)

    def wait_job(self, job_id, timeout=120):
        return wait_for(f"job {job_id} to end",
                        lambda: (lambda j: None if j["running"] else j)(self.job(job_id)),
                        timeout, 0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def peak_rss_kib(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return None


# ---- devices and files -------------------------------------------------------


class Loop:
    """A loop device over a sparse file under ROOT, detached by close()."""

    def __init__(self, name, mib):
        self.backing = os.path.join(ROOT, f"{name}.dev")
        with open(self.backing, "wb") as f:
            f.truncate(mib << 20)
        self.dev = sh("losetup", "-f", "--show", self.backing)
        self.size = mib << 20
        self.mounted = None

    def fill(self, byte):
        """Every byte of the device set to `byte` (a known "before")."""
        with open(self.dev, "wb") as f:
            f.write(bytes([byte]) * self.size)
            f.flush()
            os.fsync(f.fileno())

    def read(self, n=None, off=0):
        fd = os.open(self.dev, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            return os.pread(fd, n if n is not None else self.size, off)
        finally:
            os.close(fd)

    def sha(self):
        return hashlib.sha256(self.read()).hexdigest()

    def mount(self, at):
        sh("mkfs.ext4", "-q", "-F", "-L", "GUITEST", self.dev)
        os.makedirs(at, exist_ok=True)
        # Read-only: a mounted ext4 writes to its device by itself (the
        # journal, lazy inode-table init), which a test comparing the
        # device's bytes before and after would take for kopiru's doing.
        sh("mount", "-o", "ro,noload", self.dev, at)
        self.mounted = at

    def close(self):
        if self.mounted:
            subprocess.run(["umount", self.mounted], check=False)
        subprocess.run(["losetup", "-d", self.dev], check=False)
        try:
            os.unlink(self.backing)
        except OSError:
            pass


def ensure_user():
    """USER, with a home under ROOT, and a sudoers rule letting it run
    exactly `KOPIRU gui-helper ...` as root without a password (standing
    in for pkexec's prompt). Returns the rule's file, to remove."""
    home = os.path.join(ROOT, "home")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        sh("useradd", "--system", "--home-dir", home, "--shell", "/usr/sbin/nologin", USER)
    os.makedirs(home, exist_ok=True)
    pw = pwd.getpwnam(USER)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    os.chmod(home, 0o755)
    return home


def sudoers_rule(kopiru):
    path = "/etc/sudoers.d/kopiru-gui-test"
    text = f"{USER} ALL=(root) NOPASSWD: {kopiru} gui-helper *\n"
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o440)
    sh("visudo", "-c", "-q", "-f", tmp)
    os.rename(tmp, path)
    return path


# ---- the browser ----------------------------------------------------------------


def browser(profile):
    """Debian's Chromium, headless, driven by Debian's chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
              "--window-size=1100,1500", "--force-prefers-reduced-motion"]:
        o.add_argument(a)
    d = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=o)
    d.set_script_timeout(60)
    return d


# Where each role's controls are, so that a lookup asks the browser about
# few elements (each question is a round trip to chromedriver).
WHERE = {
    "textbox": "input[type=text], textarea",
    "button": "button",
    "switch": "[role=switch]",
    "checkbox": "input[type=checkbox]:not([role])",
    "combobox": "select",
    "progressbar": "[role=progressbar]",
}


def controls(driver, role=None):
    return driver.find_elements("css selector", WHERE.get(role, "input, button, select, [role]"))


def names(driver, role):
    """The accessible names of the controls with this role now; a control
    removed while they are read (the drive list follows the drives) is
    left out."""
    from selenium.common.exceptions import StaleElementReferenceException
    out = []
    for e in controls(driver, role):
        try:
            out.append(e.accessible_name or "")
        except StaleElementReferenceException:
            continue
    return out


def by_name(driver, role, name, prefix=False, timeout=10.0, enabled=None):
    """The visible control with this ARIA role whose accessible name is
    `name` (or starts with it): what a screen reader would find."""
    def find():
        for e in controls(driver, role):
            try:
                n = e.accessible_name or ""
                if not (n == name or (prefix and n.startswith(name))):
                    continue
                if e.aria_role != role or not e.is_displayed():
                    continue
            except Exception:
                continue
            if enabled is None or e.is_enabled() == enabled:
                return e
        return None
    return wait_for(f"a {role} named {name!r}", find, timeout, 0.2)


def all_by_role(driver, role):
    out = []
    for e in controls(driver, role):
        try:
            if e.is_displayed() and e.aria_role == role:
                out.append(e)
        except Exception:
            pass
    return out


def axe(driver, source):
    """axe-core's serious and critical violations on the page as it is."""
    driver.execute_script(source)
    res = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact,"
        " help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))))"
        ".catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));")
    return [v for v in res if v["impact"] in ("serious", "critical")]


def cleanup_root():
    shutil.rmtree(ROOT, ignore_errors=True)
