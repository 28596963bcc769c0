#!/usr/bin/env python3
"""The launcher's stages are a stack, and includes only point down it:

    cli -> campaigns -> follow -> backends -> render -> spec -> common

A file in launcher/STAGE/ may include from its own stage and the stages below it (by folder,
"spec/spec.h") and from common/ (by bare name, "error.h"); common/ and trainer/ include no stage
at all. There is no list of exceptions: a helper two stages need lives in the lower one, or in
common/ (docs/hacking.md, "Layers"). Exit 0 when every include points down, 1 otherwise, one line
per include that does not (file:line, what it includes, what to do).
Usage: layers_test.py REPO
"""
import re
import sys
from pathlib import Path

STACK = ["common", "spec", "render", "backends", "follow", "campaigns", "cli"]  # bottom first
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"')


def main():
    repo = Path(sys.argv[1])
    problems, checked = [], 0
    sources = sorted(p for d in ("launcher", "common", "trainer") for p in (repo / d).rglob("*")
                     if p.suffix in (".h", ".cc"))
    for path in sources:
        rel = path.relative_to(repo)
        top = rel.parts[0]
        own = rel.parts[1] if top == "launcher" and len(rel.parts) > 2 else top
        rank = STACK.index(own) if own in STACK else -1  # trainer/: no stage may be named
        checked += 1
        for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in STACK:
                continue
            target = m.group(1)
            if STACK.index(target) > rank:
                problems.append(
                    f"{rel}:{no}: includes {m.group(0).split(None, 1)[1].strip()} from {target}/, "
                    f"above {own}/ in the stack {' <- '.join(STACK)}: move what it needs down "
                    f"to {own}/ or common/")
    for p in problems:
        print(p)
    print(f"layers: {checked} files checked, {len(problems)} include(s) pointing up")
    return 1 if problems else 0


sys.exit(main())
