#!/usr/bin/env python3
"""pty_answer.py ANSWER TRANSCRIPT -- COMMAND...: runs COMMAND on a new pseudo-terminal (its
controlling terminal, so /dev/tty is the pty), types ANSWER and Enter each time the output ends
in a prompt (": " after "asks:"), and exits with COMMAND's status. TRANSCRIPT gets everything the
terminal showed, and a last line "prompts N": how many prompts were answered. The test of
hpclaunch's keyboard-interactive login (tests/ssh/jump_test.sh) needs a terminal that `script`
would give too, but answering only once the prompt is there is what makes it deterministic."""
import os
import pty
import select
import sys
import time


def main() -> int:
    answer, transcript_path = sys.argv[1], sys.argv[2]
    command = sys.argv[sys.argv.index("--") + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    seen = b""
    pending = b""
    prompts = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the command closed the terminal (it ended)
            break
        if not chunk:
            break
        seen += chunk
        pending += chunk
        if b"asks:" in pending and pending.rstrip(b" ").endswith(b":"):
            os.write(fd, answer.encode() + b"\n")
            prompts += 1
            pending = b""
    _, status = os.waitpid(pid, 0)
    with open(transcript_path, "wb") as out:
        out.write(seen + b"\nprompts %d\n" % prompts)
    return os.waitstatus_to_exitcode(status) % 256


if __name__ == "__main__":
    sys.exit(main())
