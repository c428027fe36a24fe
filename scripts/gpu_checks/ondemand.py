"""Play dynolog's part of Kineto's on-demand protocol for one unmodified job.

usage: ondemand.py OUTDIR -- CMD...
Binds the abstract datagram socket "\\0dynolog\\0", starts CMD with
KINETO_USE_DAEMON=1, logs every message, answers `ctxt` with an i32 0 and the
first `req` polls after 3 s with a duration trace (0.5 s), the next one after that
trace landed with an iteration trace (3 iterations); then stops CMD.
OD_AFTER_S: seconds before the first config (3); OD_EXTRA: config lines added to both
(`;`-separated, e.g. ACTIVITIES_WARMUP_PERIOD_SECS=1); OD_ONLY_DURATION=1: stop after
the duration trace.
"""
import json
import os
import socket
import struct
import subprocess
import sys
import time

out = sys.argv[1]
cmd = sys.argv[sys.argv.index("--") + 1:]
os.makedirs(out, exist_ok=True)
log = open(os.path.join(out, "ondemand_log.txt"), "a")


def say(*a):
    line = " ".join(str(x) for x in a)
    print(line, flush=True)
    log.write(line + "\n")
    log.flush()


sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sd = os.environ.get("OD_SOCKET_DIR")
sock.bind(os.path.join(sd, "dynolog") if sd else b"\0dynolog\0")
sock.settimeout(0.5)
env = dict(os.environ, KINETO_USE_DAEMON="1")
if sd: env["KINETO_IPC_SOCKET_DIR"] = sd
t0 = time.time()
child = subprocess.Popen(cmd, env=env)
say("child pid", child.pid)
phase = 0  # 0: waiting to send duration config, 1: waiting for its file, 2: iteration config sent
dur_file = os.path.join(out, "od_duration.json")
it_file = os.path.join(out, "od_iterations.json")
sent_at = None
kinds = {}
after_s = float(os.environ.get("OD_AFTER_S", "3"))
extra = "".join(line + "\n" for line in os.environ.get("OD_EXTRA", "").split(";") if line)
deadline = t0 + float(os.environ.get("OD_DEADLINE_S", "75"))


def landed(base):
    stem, ext = os.path.splitext(base)
    d = os.path.dirname(base)
    return [f for f in os.listdir(d) if f.startswith(os.path.basename(stem)) and f.endswith(ext)]


while child.poll() is None and time.time() < deadline:
    try:
        data, addr = sock.recvfrom(65536)
    except socket.timeout:
        data = None
    if phase == 1 and landed(dur_file):
        say("duration trace landed after", round(time.time() - sent_at, 2), "s:", landed(dur_file))
        phase = 4 if os.environ.get("OD_ONLY_DURATION") else 2
        sent_at = None
    if phase == 3 and landed(it_file):
        say("iteration trace landed after", round(time.time() - sent_at, 2), "s:", landed(it_file))
        phase = 4
    if phase == 4:
        time.sleep(1)
        break
    if data is None:
        continue
    size, = struct.unpack_from("<Q", data, 0)
    mtype = data[8:40].split(b"\0")[0].decode()
    payload = data[40:]
    kinds[mtype] = kinds.get(mtype, 0) + 1
    if kinds[mtype] <= 3:
        say("msg", mtype, "size", size, "len", len(payload), "from", addr, "payload", payload.hex())
    if mtype == "ctxt":
        reply = struct.pack("<i", 0)
    elif mtype == "req":
        text = b""
        if phase == 0 and time.time() - t0 > after_s:
            text = ("ACTIVITIES_LOG_FILE=%s\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=500\n%s" % (dur_file, extra)).encode()
            phase, sent_at = 1, time.time()
        elif phase == 2:
            text = ("ACTIVITIES_LOG_FILE=%s\nPROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=1\nACTIVITIES_ITERATIONS=3\n%s" % (it_file, extra)).encode()
            phase, sent_at = 3, time.time()
        if text:
            say("replying config", text)
        reply = text
    else:
        reply = b""
    header = struct.pack("<Q", len(reply)) + mtype.encode().ljust(32, b"\0")
    try:
        sock.sendto(header + reply, addr)
    except OSError as e:
        say("reply failed", e)
say("message counts", json.dumps(kinds), "phase", phase, "elapsed", round(time.time() - t0, 1))
if child.poll() is None:
    child.terminate()
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
say("child exit", child.returncode)
