#!/usr/bin/env bash
# packaging:lmod: the modulefile `cmake --install` writes, loaded with Debian's Lmod.
#   lmod_test.sh BUILD_DIR
# Installs the build into a fresh prefix, then in a clean login-like environment (no hpclaunch
# on PATH): `module use PREFIX/modulefiles; module load hpclaunch` and checks PATH
# (hpclaunch --version), MANPATH (man -w hpclaunch finds the installed page), the presets
# (HPCLAUNCH_DATA_DIR: presets list and render from the installed data, not the source tree),
# completion (bash-completion loads the installed script through XDG_DATA_DIRS; zsh's FPATH),
# that `module unload hpclaunch` takes it all away again, and that the install writes nothing
# into the folder it runs from.
set -euo pipefail
build_dir=$(cd "$1" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
lmod_init=/usr/share/lmod/lmod/init/bash
if [[ ! -r $lmod_init ]]; then
  [[ ${CI:-} == true ]] && fail "Lmod is not installed ($lmod_init; scripts/install-deps.sh installs lmod)"
  echo "WARN: Lmod not installed: skipped"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/opt/hpclaunch"
# From an empty folder: the install writes into the prefix only (once it left the modulefile's
# working copy in the folder it ran from).
mkdir "$work/cwd"
(cd "$work/cwd" && cmake --install "$build_dir" --prefix "$prefix" >/dev/null)
[[ -z $(ls -A "$work/cwd") ]] || fail "cmake --install wrote into its working folder: $(ls -A "$work/cwd")"
modulefile=$(find "$prefix/modulefiles" -name '*.lua')
echo "modulefile: ${modulefile#"$work"/}"

# A login shell's environment without the build: only the system's PATH and MANPATH.
# shellcheck disable=SC2016  # the script below expands in the inner bash
env -i HOME="$work/home" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
  PREFIX="$prefix" LMOD_INIT="$lmod_init" bash --norc --noprofile -c '
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$HOME"
source "$LMOD_INIT"
! command -v hpclaunch >/dev/null || fail "hpclaunch on PATH before module load"
module use "$PREFIX/modulefiles"
module load hpclaunch
module list 2>&1 | grep -q "hpclaunch/" || fail "module list: $(module list 2>&1)"
[[ $(command -v hpclaunch) == "$PREFIX/bin/hpclaunch" ]] || fail "PATH: $(command -v hpclaunch)"
hpclaunch --version
[[ $(man -w hpclaunch) == "$PREFIX/share/man/man1/hpclaunch.1" ]] || fail "MANPATH: $(man -w hpclaunch)"
man -w ls >/dev/null || fail "MANPATH hides the system pages"
[[ $HPCLAUNCH_DATA_DIR == "$PREFIX/share/hpclaunch" ]] || fail "HPCLAUNCH_DATA_DIR=$HPCLAUNCH_DATA_DIR"
hpclaunch presets list | grep -q "^2n4g " || fail "presets list"
hpclaunch render --no-project --preset 2n4g --cluster generic >"$HOME/job.sbatch"
grep -q "^#SBATCH --nodes=2" "$HOME/job.sbatch" || fail "render: no --nodes=2"
# bash-completion finds completions/hpclaunch through XDG_DATA_DIRS on first use.
source /usr/share/bash-completion/bash_completion
_completion_loader hpclaunch 2>/dev/null || __load_completion hpclaunch
complete -p hpclaunch | grep -q _hpclaunch || fail "bash completion not loaded"
COMP_WORDS=(hpclaunch render --preset 2n); COMP_CWORD=3; _hpclaunch
[[ "${COMPREPLY[*]}" == "2n2g 2n4g 2n8g" ]] || fail "completion: ${COMPREPLY[*]}"
[[ ":$FPATH:" == *":$PREFIX/share/zsh/site-functions:"* && -r $PREFIX/share/zsh/site-functions/_hpclaunch ]] ||
  fail "FPATH=$FPATH"
echo "loaded: PATH, MANPATH, HPCLAUNCH_DATA_DIR, bash completion (2n2g 2n4g 2n8g), FPATH"
module unload hpclaunch
! command -v hpclaunch >/dev/null || fail "hpclaunch still on PATH after module unload"
[[ -z ${HPCLAUNCH_DATA_DIR:-} ]] || fail "HPCLAUNCH_DATA_DIR left after unload"
echo "unloaded: hpclaunch gone from PATH"
'
