#!/usr/bin/env python3
"""Every program the tests and scripts run is installed by scripts/install-deps.sh.

commands_test.py REPO [--list]

Reads the shell scripts (tests/**/*.sh, scripts/*.sh, .ci/run), the shell snippets in the tests'
CMakeLists.txt, the argv lists of the C++ tests (run({"prog", ...}) and friends) and of the Python
tests (subprocess.run with a list), and lists the programs they call. Each program must be on
PATH here and belong to a Debian package that either every Debian 12 root has (Priority: required,
what debootstrap --variant=minbase installs) or that scripts/install-deps.sh names itself. A program
that arrived only as the dependency of a dependency does not count (a direct dependency of a
named package does): a later Debian release may drop it. --list prints program, package and the first place that uses it.

Exit status 0 when every program is accounted for, 1 otherwise (one line per program, with the
file:line that uses it and what to do).
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# Words in command position that are not programs: bash keywords and builtins, and the
# project's own programs (built by CMake, or scripts of this repository).
BASH_WORDS = set("""
    if then else elif fi case esac for select while until do done in function time coproc
    alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs
    disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let
    local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt
    source suspend test times trap true type typeset ulimit umask unalias unset wait
""".split())
PROJECT_PROGRAMS = {"hpclaunch", "hpctrain"}
# Words that look like a command to the scanner but are something else; each says why.
NOT_COMMANDS = {
    "hpc-no-such-program-here": "tests/: a program that must not exist (error message tests)",
    "no-such-program-hpclaunch": "tests/: a program that must not exist (error message tests)",
    "sudo": "run only by an ordinary user, whose machine's sudo is the precondition (docs/hacking.md)",
}
# Scripts that run on a host preparing a test machine, not on the machine under test: they
# install what they need themselves (scripts/install-deps.sh --fresh-root), so a program only
# they use need not be installed here; when it is, its package must still be named.
# scripts/gpu-check.sh runs on a GPU machine, whose driver brings nvidia-smi (no Debian package
# of this machine's kind has it); without a GPU it says so and exits 0.
HOST_TOOLS = {"scripts/fresh-root-test.sh", "scripts/gpu-check.sh"}
# Programs of the tests' Python environment (scripts/install-deps.sh --python: a virtual
# environment of Debian's python3 with the pins of scripts/python-requirements.txt), each with the
# PyPI package that installs it. Tests run them by path ("$venv/bin/torchrun"); one named bare is
# accounted for when its package is pinned there (PyPI is not Debian: dpkg knows nothing of it).
VENV_PROGRAMS = {"torchrun": "torch", "lightning": "lightning"}
REQUIREMENTS = "scripts/python-requirements.txt"
# Shell functions that a package's init script defines (tests source it first), with that package.
SHELL_FUNCTIONS = {"module": "lmod"}  # /usr/share/lmod/lmod/init/bash (tests/packaging)
# Wrappers whose first non-option argument is again a command.
WRAPPERS = {"env", "sudo", "timeout", "nohup", "nice", "setsid", "xargs", "unshare", "flock",
            "runuser", "stdbuf"}


KEYWORDS_BEFORE_COMMAND = {"then", "do", "else", "elif", "if", "while", "until", "!", "time", "{"}
WORD_END = set(" \t\n;&|()<>")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
PROGRAM = re.compile(r"[a-z][a-z0-9_.+-]*")


class ShellScanner:
    """A small bash lexer: just enough to find the words in command position.

    It knows quotes, comments, here-documents, $(...), backticks, ${...}, (( )), [[ ]], case
    patterns, for-lists and VAR=value prefixes; inside single quotes nothing is a command (awk and
    sed programs), inside double quotes only $(...) and backticks start one."""

    def __init__(self, text):
        self.s, self.i, self.found = text, 0, []
        self.heredocs = []  # terminators whose bodies start at the next newline

    def line(self):
        return self.s.count("\n", 0, self.i) + 1

    def peek(self, k=0):
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def scan(self):
        self.commands(closer=None)
        return self.found

    def word(self):
        """Reads one unquoted-or-quoted shell word from i; returns its literal text (approximate)."""
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in WORD_END:
            c = self.s[self.i]
            if c == "'":
                self.single_quoted()
            elif c == '"':
                self.double_quoted()
            else:
                self.escape_or_expansion()
        return self.s[start:self.i]

    def escape_or_expansion(self):
        """Steps over the character at i: a backslash escape, $..., a `...` command, or itself."""
        c = self.s[self.i]
        if c == "\\":
            self.i += 2
        elif c == "$":
            self.dollar()
        elif c == "`":
            self.i += 1
            self.commands(closer="`")
        else:
            self.i += 1

    def single_quoted(self):
        end = self.s.find("'", self.i + 1)
        self.i = len(self.s) if end < 0 else end + 1

    def double_quoted(self):
        self.i += 1
        while self.i < len(self.s) and self.s[self.i] != '"':
            self.escape_or_expansion()
        self.i += 1

    def dollar(self):
        if self.s.startswith("$((", self.i):
            self.skip_balanced("((", "))")
        elif self.s.startswith("$(", self.i):
            self.i += 2
            self.commands(closer=")")
        elif self.s.startswith("${", self.i):
            self.skip_balanced("{", "}")
        else:
            self.i += 1

    def skip_balanced(self, opener, closer):
        self.i = self.s.index(opener, self.i) + len(opener)
        depth = 1
        while self.i < len(self.s) and depth:
            if self.s.startswith(closer, self.i):
                depth -= 1
                self.i += len(closer)
            elif self.s.startswith(opener, self.i):
                depth += 1
                self.i += len(opener)
            elif self.s[self.i] in "'\"":
                self.single_quoted() if self.s[self.i] == "'" else self.double_quoted()
            else:
                self.i += 1

    def skip_heredoc_bodies(self):
        for terminator in self.heredocs:
            while self.i < len(self.s):
                eol = self.s.find("\n", self.i)
                eol = len(self.s) if eol < 0 else eol
                body_line, self.i = self.s[self.i:eol], eol + 1
                if body_line.strip() == terminator:
                    break
        self.heredocs = []

    def commands(self, closer):
        """Scans a command list until `closer` (")" or "`", None for the end of the text)."""
        at_command, skip_until, in_case, case_pattern = True, None, 0, False
        while self.i < len(self.s):
            c = self.s[self.i]
            if closer and self.s.startswith(closer, self.i) and not case_pattern:
                self.i += len(closer)
                return
            if c == "\n":
                self.i += 1
                self.skip_heredoc_bodies()
                if skip_until is None:
                    at_command = True
                continue
            if c in " \t":
                self.i += 1
                continue
            if c == "\\" and self.peek(1) == "\n":
                self.i += 2
                continue
            if c == "#":
                eol = self.s.find("\n", self.i)
                self.i = len(self.s) if eol < 0 else eol
                continue
            if self.s.startswith("((", self.i):
                self.skip_balanced("((", "))")
                at_command = False
                continue
            if self.s.startswith(";;", self.i):
                self.i += 3 if self.peek(2) in "&" else 2
                at_command, case_pattern = False, bool(in_case)
                continue
            if c in ";&|":
                self.i += 1
                if skip_until is None or skip_until == ";":
                    skip_until = None if skip_until == ";" else skip_until
                    at_command = skip_until is None
                continue
            if c == "(":
                self.i += 1
                self.commands(closer=")")
                at_command = False
                continue
            if c == ")":
                self.i += 1
                if case_pattern:
                    case_pattern, at_command = False, True
                continue
            m = HEREDOC.match(self.s, self.i)
            if m:
                self.heredocs.append(m.group(2))
                self.i = m.end()
                continue
            if c in "<>":
                self.i += 1
                continue
            line = self.line()
            w = self.word()
            if w.endswith("=") and self.peek() == "(":  # name=( array ), possibly over lines
                self.skip_balanced("(", ")")
                continue
            if w == "esac" and in_case:
                in_case, case_pattern, at_command = in_case - 1, False, False
                continue
            if case_pattern:
                continue
            if skip_until:
                if w == skip_until:
                    skip_until, at_command = None, skip_until in ("do", "in")
                    if w == "in" and in_case:
                        case_pattern, at_command = True, False
                continue
            if not at_command:
                continue
            if ASSIGNMENT.match(w):
                continue  # VAR=value cmd: the command follows
            if w in ("for", "select"):
                skip_until, at_command = "do", False
                continue
            if w == "case":
                in_case += 1
                skip_until, at_command = "in", False
                continue
            if w == "[[":
                skip_until, at_command = "]]", False
                continue
            if w in ("function",):
                skip_until = ";"
                continue
            if w in KEYWORDS_BEFORE_COMMAND or w in WRAPPER_OPTIONS_TAKE_COMMAND:
                continue
            if w in WRAPPERS:
                self.found.append((line, w))
                self.after_wrapper()
                continue
            if PROGRAM.fullmatch(w):
                self.found.append((line, w))
            at_command = False

    def after_wrapper(self):
        """Skips a wrapper's options and their values; the next word is a command again."""
        while True:
            save = self.i
            while self.peek() in " \t":
                self.i += 1
            w = self.word() if self.peek() not in WORD_END else ""
            if w.startswith("-") or re.fullmatch(r"[0-9.]+[smhd]?", w) or ASSIGNMENT.match(w):
                continue  # an option, a duration (timeout) or a VAR=value (env)
            self.i = save
            return


WRAPPER_OPTIONS_TAKE_COMMAND = {"exec", "command"}
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def shell_commands(text):
    """(line number, word) for each word in command position in shell source `text`."""
    return ShellScanner(text).scan()


def functions_in(text):
    return set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)", text, re.M))


CPP_ARGV = re.compile(
    r"\b(?:run|run_process|run_command|run_ok|spawn|shell|LiveProcess|sh)\s*\(\s*\{\s*\"([^\"]+)\"")
PY_ARGV = re.compile(r"subprocess\.\w+\(\s*\[\s*[\"']([^\"']+)[\"']")
CMAKE_SHELL = re.compile(r"COMMAND\s+bash\s+-c\s+\"((?:[^\"\\]|\\.)*)\"", re.S)


def uses(repo):
    """{program: ['file:line' of each use]}."""
    found = {}
    shell_files = sorted(set((repo / "tests").rglob("*.sh")) | set((repo / "scripts").rglob("*.sh")))
    shell_files += [p for p in [repo / ".ci" / "run"] if p.exists()]
    functions = set()
    for p in shell_files:
        functions |= functions_in(p.read_text())

    def add(word, where):
        if word in BASH_WORDS or word in functions or word in PROJECT_PROGRAMS:
            return
        if word in NOT_COMMANDS or "/" in word:
            return
        found.setdefault(word, []).append(where)

    for p in shell_files:
        for n, word in shell_commands(p.read_text()):
            add(word, f"{p.relative_to(repo)}:{n}")
    for p in sorted((repo / "tests").rglob("CMakeLists.txt")):
        text = p.read_text()
        for m in CMAKE_SHELL.finditer(text):
            n = text.count("\n", 0, m.start()) + 1
            body = m.group(1).replace('\\"', '"').replace("\\$", "$").replace("\\\n", " ")
            for _, word in shell_commands(body):
                add(word, f"{p.relative_to(repo)}:{n}")
        for m in re.finditer(r"COMMAND\s+([a-z][a-z0-9_.+-]*)\s", text):
            add(m.group(1), f"{p.relative_to(repo)}:{text.count(chr(10), 0, m.start()) + 1}")
    for pattern, glob in [(CPP_ARGV, "*.cc"), (PY_ARGV, "*.py")]:
        for p in [f for d in ("tests", "launcher", "common") for f in sorted((repo / d).rglob(glob))]:
            if p.resolve() == Path(__file__).resolve():
                continue
            text = p.read_text()
            for m in pattern.finditer(text):
                word = m.group(1)
                if " " in word:  # a shell snippet: sh -c "..."
                    continue
                add(word.rsplit("/", 1)[-1] if word.startswith("/") else word,
                    f"{p.relative_to(repo)}:{text.count(chr(10), 0, m.start()) + 1}")
    return found


# Where Debian installs programs: a program that exists only in /usr/local or a user's own
# PATH (pyenv, a virtualenv) is not one a fresh Debian root would have.
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def package_of(program):
    """(Debian package owning the program, or None; the path found, or None)."""
    path = shutil.which(program, path=DEBIAN_PATH)
    if not path:
        return None, None
    candidates = [path, os.path.realpath(path)]
    for c in list(candidates):  # usrmerge: dpkg may know /bin/x for /usr/bin/x and back
        if c.startswith("/usr/"):
            candidates.append(c[4:])
        else:
            candidates.append("/usr" + c)
    for c in candidates:
        r = subprocess.run(["dpkg-query", "-S", c], capture_output=True, text=True)
        owners = [l.split(":", 1)[0].split(",")[0].strip() for l in r.stdout.splitlines()
                  if l and not l.startswith("diversion by")]
        if owners:
            return owners[0], path
    return None, path


def direct_dependencies(packages):
    """The packages that the installed `packages` depend on directly (Depends, Pre-Depends)."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}\\n", *packages],
                       capture_output=True, text=True)
    names = set()
    for part in re.split(r"[,|]", r.stdout):
        name = part.strip().split(" ", 1)[0].split(":", 1)[0]
        if name:
            names.add(name)
    return names


def pinned_requirements(repo):
    """({lower-case name: version} of the exact pins, [problems]) of scripts/python-requirements.txt:
    every requirement is pinned with ==, so that the environment is the same on every machine."""
    path = repo / REQUIREMENTS
    if not path.exists():
        return {}, []
    pins, problems = {}, []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line)
        if not m:
            problems.append(f"{REQUIREMENTS}:{n}: '{line}' is not pinned; write name==version")
            continue
        pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins, problems


def priority(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Priority}", package], capture_output=True, text=True)
    return r.stdout.strip()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    repo = Path(args[0]).resolve()
    listed = subprocess.run([str(repo / "scripts" / "install-deps.sh"), "--list"],
                            capture_output=True, text=True, check=True).stdout.split()
    allowed = set(listed) | direct_dependencies(listed)
    pins, problems = pinned_requirements(repo)
    rows = []
    for program, places in sorted(uses(repo).items()):
        where = places[0]
        if program in VENV_PROGRAMS:
            req = VENV_PROGRAMS[program]
            if req in pins:
                rows.append(f"{program:16} {'venv: ' + req + '==' + pins[req]:20} {where}")
            else:
                problems.append(f"{where}: '{program}' comes from the PyPI package '{req}', which "
                                f"{REQUIREMENTS} does not pin; add {req}==VERSION there")
            continue
        if program in SHELL_FUNCTIONS:
            package = SHELL_FUNCTIONS[program]
            if package in allowed:
                rows.append(f"{program:16} {'function: ' + package:20} {where}")
            else:
                problems.append(f"{where}: '{program}' is a shell function of the Debian package "
                                f"'{package}'; add it to scripts/install-deps.sh")
            continue
        package, path = package_of(program)
        if path is None and all(p.split(":")[0] in HOST_TOOLS for p in places):
            rows.append(f"{program:16} {'(host tool)':20} {where}")
            continue
        if path is None:
            problems.append(f"{where}: '{program}' is not installed here; add the Debian package "
                            "that provides it to scripts/install-deps.sh")
            continue
        if package is None:
            problems.append(f"{where}: '{program}' ({path}) belongs to no Debian package; "
                            "install it through scripts/install-deps.sh")
            continue
        if package not in allowed and priority(package) != "required":
            problems.append(f"{where}: '{program}' comes from '{package}', which scripts/install-deps.sh "
                            "does not name (it arrived as a dependency's dependency); add it there")
            continue
        rows.append(f"{program:16} {package:20} {where}")
    if "--list" in sys.argv:
        print("\n".join(rows))
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{len(rows)} programs accounted for, {len(problems)} not", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
