#!/usr/bin/env bash
# packaging:easybuild: packaging/easybuild/hpclaunch-VERSION.eb with EasyBuild from PyPI.
#   easybuild_test.sh SOURCE_DIR [--dry-run-only]
# EasyBuild (pinned below) lives in a virtual environment of Debian's python3 under
# ${XDG_CACHE_HOME:-~/.cache}/hpclaunch/easybuild-VERSION, made once (~15 MB from PyPI).
# 1. the source tarball the easyconfig names, from the checkout (git archive; the working tree's
#    files when it is not a checkout);
# 2. `eb --dry-run` resolves the easyconfig (SYSTEM toolchain, osdependencies);
# 3. `eb` builds and installs it for real (CMakeMake, the launcher only: 233 s alone on the 2-core
#    machine, 598 s beside other builds) and runs its sanity checks (hpclaunch --version, presets
#    list, render);
# 4. Lmod loads the module EasyBuild wrote: hpclaunch --version, HPCLAUNCH_DATA_DIR.
# --dry-run-only (CMake: -DHPC_TEST_EASYBUILD_BUILD=OFF) stops after 2.
set -euo pipefail
source_dir=$1
dry_run_only=${2:-}
easybuild_version=5.4.1
fail() { echo "FAIL: $*" >&2; exit 1; }
missing() {
  [[ ${CI:-} == true ]] && fail "$1"
  echo "WARN: $1: skipped"
  exit 0
}
lmod_init=/usr/share/lmod/lmod/init/bash
[[ -r $lmod_init ]] || missing "Lmod is not installed (scripts/install-deps.sh installs lmod)"
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || missing "python3-venv is not installed"
venv=${XDG_CACHE_HOME:-$HOME/.cache}/hpclaunch/easybuild-$easybuild_version
mkdir -p "$(dirname "$venv")"
(
  flock 9
  if [[ ! -x $venv/bin/eb ]]; then
    started=$SECONDS
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "easybuild==$easybuild_version" ||
      { rm -rf "$venv"; exit 1; }
    echo "EasyBuild $easybuild_version installed from PyPI in $((SECONDS - started)) s: $venv"
  fi
) 9>"$venv.lock" || missing "pip install easybuild==$easybuild_version failed (PyPI unreachable?)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
easyconfig=$(find "$source_dir/packaging/easybuild" -name 'hpclaunch-*.eb' | head -1)
version=$(sed -n "s/^version = '\(.*\)'$/\1/p" "$easyconfig")
mkdir -p "$work/src"
if git -C "$source_dir" rev-parse HEAD >/dev/null 2>&1; then
  # The working tree as it is (committed or not): stash create names it without touching it.
  tree=$(git -C "$source_dir" stash create 2>/dev/null || true)
  git -C "$source_dir" archive --prefix="hpclaunch-$version/" \
    -o "$work/src/hpclaunch-$version.tar.gz" "${tree:-HEAD}"
else
  tar -C "$(dirname "$source_dir")" --transform "s|^$(basename "$source_dir")|hpclaunch-$version|" \
    --exclude='./build*' -czf "$work/src/hpclaunch-$version.tar.gz" "$(basename "$source_dir")"
fi

export PATH="$venv/bin:$PATH" EB_PYTHON=/usr/bin/python3
# shellcheck source=/dev/null
source "$lmod_init"
eb_args=(--prefix="$work/eb" --sourcepath="$work/src" --parallel=2)
# EasyBuild refuses root unless told; the tests may run as root (containers, CI).
[[ $(id -u) -ne 0 ]] || eb_args+=(--allow-use-as-root-and-accept-consequences)

"$venv/bin/eb" "$easyconfig" --dry-run "${eb_args[@]}" >"$work/dry-run.log" 2>&1 ||
  { cat "$work/dry-run.log"; fail "eb --dry-run"; }
grep -q "hpclaunch-$version.eb (module: hpclaunch/$version)" "$work/dry-run.log" ||
  { cat "$work/dry-run.log"; fail "eb --dry-run did not resolve hpclaunch/$version"; }
echo "eb --dry-run: resolves hpclaunch/$version"
if [[ $dry_run_only == --dry-run-only ]]; then
  echo "the real build is off (-DHPC_TEST_EASYBUILD_BUILD=OFF)"
  exit 0
fi

started=$SECONDS
"$venv/bin/eb" "$easyconfig" "${eb_args[@]}" >"$work/build.log" 2>&1 || {
  tail -30 "$work/build.log"
  find "$work" -name 'easybuild-hpclaunch-*.log' -exec tail -40 {} \;
  fail "eb $(basename "$easyconfig")"
}
grep -q "COMPLETED: Installation ended successfully" "$work/build.log" ||
  { tail -20 "$work/build.log"; fail "eb did not complete"; }
echo "eb: built, installed and sanity-checked in $((SECONDS - started)) s"

module use "$work/eb/modules/all"
module load "hpclaunch/$version"
line=$(hpclaunch --version)
echo "module load hpclaunch/$version: $line"
[[ $line == "hpclaunch $version (git unknown)" ]] || fail "--version: $line (a tarball has no commit)"
[[ $(command -v hpclaunch) == "$work/eb/software/hpclaunch/$version/bin/hpclaunch" ]] ||
  fail "PATH: $(command -v hpclaunch)"
[[ $HPCLAUNCH_DATA_DIR == "$work/eb/software/hpclaunch/$version/share/hpclaunch" ]] ||
  fail "HPCLAUNCH_DATA_DIR=$HPCLAUNCH_DATA_DIR"
hpclaunch presets list | grep -q '^2n4g ' || fail "presets list"
echo "module: PATH, HPCLAUNCH_DATA_DIR, presets list"
