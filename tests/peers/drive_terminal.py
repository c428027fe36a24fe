"""Drives a command in a pseudo-terminal, as a person at a terminal would, for tests of
`mlprof top`'s screen: runs argv[3:] in a 150x40 pty, and for each step of the plan in
argv[1] (JSON: [[text_to_wait_for, keys_to_send], ...]) waits up to argv[2] seconds for
the text to appear on screen, then types the keys. Prints the screen text seen (escape
sequences removed) and exits with the command's status, or 3 if a text never came.
"""
import fcntl
import json
import os
import pty
import re
import select
import struct
import sys
import termios
import time

plan = json.loads(sys.argv[1])
wait = float(sys.argv[2])
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[3], sys.argv[3:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))
seen = b""


def read_for(seconds):
    global seen
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            seen += chunk
    return True


def screen_text():
    return re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]", b" ", seen).decode("utf-8", "replace")


for text, keys in plan:
    deadline = time.time() + wait
    while text not in re.sub(r"\s+", " ", screen_text()):
        if time.time() > deadline or not read_for(0.2):
            print(screen_text())
            print(f"drive_terminal: {text!r} never appeared", file=sys.stderr)
            os.kill(pid, 9)
            sys.exit(3)
    os.write(fd, keys.encode())
    read_for(0.3)
end = time.time() + wait
while time.time() < end:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        read_for(0.2)
        print(screen_text())
        sys.exit(os.waitstatus_to_exitcode(status))
    read_for(0.1)
print(screen_text())
print("drive_terminal: the command did not exit", file=sys.stderr)
os.kill(pid, 9)
sys.exit(3)
