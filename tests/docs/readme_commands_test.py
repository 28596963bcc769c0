#!/usr/bin/python3
"""Every hpclaunch command of README.md and docs/quickstart.md runs, in the time the text implies.

The commands are read from the files' ```sh and ```console blocks (a "$ " prompt, "\\"
continuations and ";"-separated commands taken apart; a trailing "  # comment" dropped), so a
command added to the docs is tested without editing this file. Each one is run as a reader on a
2-core machine without a cluster can run it:

  run ... --local        as written, in a folder holding the corpus.txt it names (its job
                         id stands in for the docs' 12345 below); bound 120 s: "a small GPT-2"
  status/logs/cancel/report/list, rerun/diff 12345 [12399]
                         against that local job (12399: the rerun's job)
  run/shell for a cluster (no --local), validate --live
                         rendered instead (`render` with the same flags, without --host):
                         the spec resolves and the script is written; no job is submitted
  render/validate/presets/clusters/hostlist/--version
                         as written
A command the table does not know fails the test: decide how to run it, then add it here.
Every other command gets 15 s. Exit 0 is expected everywhere except where the docs show an
error (`--set shape.node=2`: exit 2).
Usage: readme_commands_test.py SOURCE_DIR BUILD_DIR_OF_HPCLAUNCH BUILD_DIR_OF_HPCTRAIN
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SOURCE, LAUNCHER_DIR, TRAINER_DIR = sys.argv[1:4]
DOCS = ["README.md", "docs/quickstart.md"]
RUN_LOCAL_BOUND, OTHER_BOUND = 120, 15
EXPECTED_EXIT = {"render -p 1n2g --set shape.node=2": 2}  # the docs show the error it gives
failures = []


def commands(path):
    """(line number, argv) of each hpclaunch command in the file's sh/console blocks."""
    out, block, pending, start = [], None, "", 0
    for no, line in enumerate(open(os.path.join(SOURCE, path)), 1):
        line = line.rstrip("\n")
        if line.startswith("```"):
            block = None if block is not None else line[3:].strip()
            continue
        if block not in ("sh", "console"):
            continue
        if block == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        line = re.sub(r"\s{2,}#.*$", "", line)  # a trailing comment
        if not pending:
            start = no
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text, pending = pending + line, ""
        for part in text.split("; "):
            words = shlex.split(part, comments=True)
            if words and words[0] == "hpclaunch":
                pipe = words.index("|") if "|" in words else len(words)  # `| sed ...`: the command
                out.append((start, words[1:pipe]))
    return out


def run(argv, cwd, env, bound, expect=0):
    t = time.monotonic()
    try:
        p = subprocess.run(["hpclaunch", *argv], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=bound)
        rc, tail = p.returncode, (p.stdout + p.stderr).strip().splitlines()[-3:]
    except subprocess.TimeoutExpired:
        rc, tail = "timeout", []
    took = time.monotonic() - t
    ok = rc == expect
    print(f"{'ok  ' if ok else 'FAIL'} {took:6.1f} s (bound {bound} s) hpclaunch {shlex.join(argv)}")
    if not ok:
        print(f"     exit {rc}, expected {expect}: " + " | ".join(tail))
        failures.append(shlex.join(argv))
    return p.stdout + p.stderr if rc != "timeout" else ""


def without(argv, flag, takes_value):
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == flag:
            skip = takes_value
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def main():
    work = tempfile.mkdtemp(prefix="readme-commands.")
    try:
        env = dict(os.environ, PATH=f"{LAUNCHER_DIR}:{TRAINER_DIR}:{os.environ['PATH']}",
                   XDG_CONFIG_HOME=os.path.join(work, "config"), OMP_NUM_THREADS="1")
        env.pop("HPCLAUNCH_PATH", None)
        shutil.copy("/usr/share/common-licenses/GPL-3", os.path.join(work, "corpus.txt"))
        found = [(doc, no, argv) for doc in DOCS for no, argv in commands(doc)]
        print(f"{len(found)} hpclaunch commands in {', '.join(DOCS)}")
        # The local runs first: the job-id verbs below talk about their jobs.
        jobs = []
        for doc, no, argv in found:
            if argv[:1] == ["run"] and "--local" in argv:
                out = run(argv, work, env, RUN_LOCAL_BOUND)
                jobs += re.findall(r"submitted job (\d+)", out)
        for doc, no, argv in found:
            verb = argv[0] if argv else ""
            if verb == "run" and "--local" in argv:
                continue
            if verb in ("run", "shell") or (verb == "validate" and "--live" in argv):
                args = without(without(argv[1:], "--host", True), "--live", False)
                if verb == "shell":
                    args = without(args, "--dry-run", False)
                run(["render", *args, "-o", os.path.join(work, f"rendered-{no}.sbatch")], work,
                    env, OTHER_BOUND)
            elif verb in ("status", "logs", "cancel", "report", "rerun", "diff", "list"):
                if not jobs:
                    print(f"FAIL {doc}:{no}: hpclaunch {shlex.join(argv)}: no local job to ask")
                    failures.append(shlex.join(argv))
                    continue
                if verb == "rerun":  # a second job, for `diff 12345 12399`
                    out = run([*argv[:1], jobs[0], *argv[2:]], work, env, RUN_LOCAL_BOUND)
                    jobs += re.findall(r"submitted job (\d+)", out)
                    continue
                ids = iter(jobs)
                args = [next(ids, jobs[-1]) if re.fullmatch(r"\d{5}", a) else a for a in argv]
                run(args, work, env, OTHER_BOUND)
            elif verb in ("render", "validate", "presets", "clusters", "hostlist", "--version"):
                run(argv, work, env, OTHER_BOUND, EXPECTED_EXIT.get(shlex.join(argv), 0))
            else:
                print(f"FAIL {doc}:{no}: hpclaunch {shlex.join(argv)}: this test does not know "
                      "how to run it: add it to the table in tests/docs/readme_commands_test.py")
                failures.append(shlex.join(argv))
    finally:
        subprocess.run(["pkill", "-f", work], check=False)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} command(s) failed")
        sys.exit(1)
    print("every command ran within its bound")


main()
