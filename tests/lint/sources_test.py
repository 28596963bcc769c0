#!/usr/bin/env python3
"""lint:sources — the layout rules of docs/hacking.md that a reader would otherwise check by hand.

  * no C++ line over 100 columns (.clang-format's limit; clang-format cannot break raw strings);
  * no C++ source file over 700 lines;
  * no ';' in a Catch2 TEST_CASE name (CTest splits a name at ';', then runs neither half), and
    no backslash (catch_discover_tests does not escape it, so the name matches no test; every
    Catch test also runs with --warn NoTests, so such a name fails instead of passing);
  * trainer/ never names launcher/ (it shares only common/).

Usage: sources_test.py SOURCE_DIR. Prints one line per violation and exits 1 when there is one.
"""
import pathlib
import re
import sys

MAX_COLUMNS = 100
MAX_LINES = 700
TEST_CASE = re.compile(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"')


SOURCE_DIRS = ("bench", "common", "fuzz", "launcher", "tests", "trainer")


def sources(root, suffixes, dirs=SOURCE_DIRS):
    """The files with these suffixes under the source folders (no git needed: a tarball works)."""
    found = []
    for d in dirs:
        found += [p for p in sorted((root / d).rglob("*")) if p.is_file() and p.suffix in suffixes
                  and "__pycache__" not in p.parts]
    return found


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    cxx = sources(root, {".cc", ".h"})
    if not cxx:
        print(f"lint: no C++ files under {root}: is it the source folder?")
        return 1
    problems = []
    for path in cxx:
        rel = path.relative_to(root)
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES:
            problems.append(f"{rel}: {len(lines)} lines; split it (at most {MAX_LINES})")
        for number, line in enumerate(lines, 1):
            if len(line) > MAX_COLUMNS:
                problems.append(f"{rel}:{number}: {len(line)} columns (at most {MAX_COLUMNS})")
        for match in TEST_CASE.finditer("\n".join(lines)):
            if ";" in match.group(1):
                problems.append(f"{rel}: TEST_CASE \"{match.group(1)}\" has a ';': CTest would "
                                "split the name and run neither half")
            if "\\" in match.group(1):
                problems.append(f"{rel}: TEST_CASE \"{match.group(1)}\" has a backslash: the name "
                                "CTest hands to Catch then matches no test; say it in words")
    for path in sources(root, {".cc", ".h", ".txt", ".py", ".sh", ".md"}, ("trainer",)):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "launcher/" in text:
            problems.append(f"{path.relative_to(root)}: names launcher/; the trainer shares only "
                            "common/")
    for p in problems:
        print(p)
    print(f"lint: {len(cxx)} C++ files checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
