#!/usr/bin/env bash
# packaging:version: --version names the commit a binary was built from.
#   version_test.sh SOURCE_DIR HPCLAUNCH [HPCTRAIN]
# 1. hpclaunch (and hpctrain, when built) print "NAME X.Y.Z (git REV)" first (hpctrain then the
#    LibTorch, CUDA, NCCL and Gloo it was built with), REV the checkout's HEAD
#    (with -dirty when tracked files differ) or "unknown" outside a checkout;
# 2. cmake/git_revision.cmake gives "unknown" for a release tarball (files, no .git), also one
#    unpacked inside another checkout, and the name a packager passes (-DREVISION);
# 3. it follows a new commit without a reconfigure, and leaves the header alone when nothing
#    changed (so a build with nothing new recompiles nothing).
set -euo pipefail
source_dir=$1 hpclaunch=$2 hpctrain=${3:-}
script="$source_dir/cmake/git_revision.cmake"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

revision_of() {  # the revision git_revision.cmake writes for DIR [REVISION]
  cmake -DSOURCE_DIR="$1" -DOUTPUT="$work/rev.h" -DREVISION="${2:-}" -P "$script"
  sed -n 's/^#define HPC_GIT_REVISION "\(.*\)"$/\1/p' "$work/rev.h"
}

# 1. The binaries.
if head=$(git -C "$source_dir" rev-parse --short=12 HEAD 2>/dev/null); then
  expected="$head(-dirty)?"
else
  expected=unknown
fi
for program in "$hpclaunch" $hpctrain; do
  name=$(basename "$program")
  out=$("$program" --version)
  echo "$out"
  line=${out%%$'\n'*}
  [[ $line =~ ^$name\ [0-9]+\.[0-9]+\.[0-9]+\ \(git\ $expected\)$ ]] ||
    fail "$name --version: '$line', expected '$name X.Y.Z (git $expected)'"
done

# 2. A release tarball, alone and inside another checkout; a packager's name.
git -C "$source_dir" rev-parse HEAD >/dev/null 2>&1 || { echo "not a checkout: 2 and 3 skipped"; exit 0; }
mkdir -p "$work/tarball"
cp -r "$source_dir/cmake" "$work/tarball/"  # what a release tarball holds: the files, no .git
[[ $(revision_of "$work/tarball") == unknown ]] || fail "tarball: $(cat "$work/rev.h")"
git init -q "$work/outer"
mkdir -p "$work/outer/stage"
cp -r "$source_dir/cmake" "$work/outer/stage/"
[[ $(revision_of "$work/outer/stage") == unknown ]] ||
  fail "tarball inside another checkout took its revision: $(cat "$work/rev.h")"
[[ $(revision_of "$work/tarball" v0.1.0-3-gabc) == v0.1.0-3-gabc ]] || fail "-DREVISION ignored"
echo "tarball: unknown; inside another checkout: unknown; -DREVISION=v0.1.0-3-gabc: kept"

# 3. A new commit shows up; nothing new leaves the header untouched.
repo="$work/repo"
git init -q "$repo"
git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m one
first=$(revision_of "$repo")
[[ $first == $(git -C "$repo" rev-parse --short=12 HEAD) ]] || fail "first commit: $first"
touch -d '2000-01-01' "$work/rev.h"
revision_of "$repo" >/dev/null
[[ $(stat -c %Y "$work/rev.h") == $(date -d '2000-01-01' +%s) ]] ||
  fail "header rewritten though the revision did not change"
git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m two
second=$(revision_of "$repo")
[[ $second != "$first" && $second == $(git -C "$repo" rev-parse --short=12 HEAD) ]] ||
  fail "second commit not seen: $first -> $second"
echo tracked >"$repo/f" && git -C "$repo" add f &&
  git -C "$repo" -c user.name=t -c user.email=t@t commit -q -m three && echo changed >"$repo/f"
[[ $(revision_of "$repo") == "$(git -C "$repo" rev-parse --short=12 HEAD)-dirty" ]] ||
  fail "a changed tracked file is not -dirty"
echo "refresh: $first -> $second, -dirty seen, unchanged header kept"
