#!/usr/bin/env python3
"""packaging:man: the generated man page renders with man-db/groff and holds the whole CLI.

    man_test.py PROGRAM MAN_PAGE

The command line's own --help (CLI11's formatter, independent of the man-page writer) is the
oracle: every command and subcommand it lists has its subsection in the page ("hpclaunch presets
show"), and every flag its --help lists appears in that subsection. `man -l --warnings` must render
the page with exit status 0 and no warning from groff.
"""
import os
import re
import subprocess
import sys

program, page = sys.argv[1], sys.argv[2]
name = os.path.basename(program)
env = dict(os.environ, MANWIDTH="200", LC_ALL="C", MAN_KEEP_FORMATTING="")
render = subprocess.run(["man", "--warnings", "-E", "ascii", "-l", page], env=env,
                        capture_output=True, text=True)
if render.returncode != 0 or render.stderr.strip():
    sys.exit(f"FAIL: man -l {page}: status {render.returncode}: {render.stderr.strip()}")
text = render.stdout
if not re.search(rf"^{name.upper()}\(1\)", text, re.M):
    sys.exit(f"FAIL: no {name.upper()}(1) header in the rendered page")


def help_of(path):
    out = subprocess.run([program, *path, "--help"], capture_output=True, text=True, check=True)
    flags, subcommands, section = [], [], None
    for line in out.stdout.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        m = re.match(r"^  (\S+)", line)
        if not m:
            continue
        if section == "Options":
            flags += [f for f in m.group(1).split(",") if f.startswith("-")]
        elif section == "Subcommands":
            subcommands.append(m.group(1))
    return flags, subcommands


def section_of(path):
    """The rendered subsection of `name path...`: from its heading to the next heading."""
    heading = " ".join([name, *path])
    m = re.search(rf"^   {re.escape(heading)}\n(.*?)(?=^   {re.escape(name)} \S|^\S)", text,
                  re.M | re.S)
    return m.group(1) if m else None


checked_commands = checked_flags = 0
todo = [[]]
while todo:
    path = todo.pop(0)
    flags, subcommands = help_of(path)
    body = text if not path else section_of(path)
    if body is None:
        sys.exit(f"FAIL: {name} {' '.join(path)}: no subsection in the man page")
    for flag in flags:
        if flag in ("-h", "--help") and path:
            continue  # -h/--help: listed once, under OPTIONS
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", body):
            sys.exit(f"FAIL: {name} {' '.join(path)}: {flag} missing from its man-page section")
        checked_flags += 1
    checked_commands += 1
    todo += [path + [s] for s in subcommands]
print(f"{page}: renders without warnings; {checked_commands} commands, {checked_flags} flags found")
