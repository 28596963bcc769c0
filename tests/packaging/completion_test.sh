#!/usr/bin/env bash
# packaging:completion: bash and zsh completion of hpclaunch, through the installed scripts.
#   completion_test.sh SOURCE_DIR HPCLAUNCH
# bash: packaging/completion/hpclaunch.bash is sourced, COMP_WORDS/COMP_CWORD are set as bash
# sets them for a command line, the function `complete -p hpclaunch` names is called, and
# COMPREPLY is compared with what hpclaunch's own listings say (--help's verbs and flags,
# `presets list --json`, `clusters list --json`), also for a preset added through HPCLAUNCH_PATH.
# zsh: `zsh -n` on _hpclaunch; the function run in zsh with compsys's words/CURRENT and a compadd
# that prints what it is given (all candidates); and zsh's real compsys in an interactive zsh on a
# pseudo-terminal (zsh_compsys.zsh: TAB completes a unique candidate into the line).
set -euo pipefail
source_dir=$1 hpclaunch=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export XDG_CONFIG_HOME="$work/config" HPCLAUNCH_PATH="$work/mine"
mkdir -p "$work/mine/shapes"
cp "$source_dir/presets/shapes/1n2g.json" "$work/mine/shapes/my-1n2g.json"

# shellcheck source=/dev/null
source "$source_dir/packaging/completion/hpclaunch.bash"
function=$(complete -p hpclaunch | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
[[ $function == _hpclaunch ]] || fail "complete -p hpclaunch: $(complete -p hpclaunch)"
complete -p hpclaunch | grep -q -- '-o default' || fail "no file-name fallback (-o default)"

# complete LINE...: COMP_WORDS as bash splits the line (the last word is the one completed);
# prints COMPREPLY sorted, one a line.
complete_line() {
  COMP_WORDS=("$hpclaunch" "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  "$function" hpclaunch "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
  printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort
}
expect() {  # expect "WORDS" EXPECTED-LINES LINE...
  local what=$1 expected=$2 got
  shift 2
  got=$(complete_line "$@")
  [[ $got == "$expected" ]] || fail "$what: [$*] gave [${got//$'\n'/ }], expected [${expected//$'\n'/ }]"
  echo "ok: $what: $(echo "$got" | wc -l) candidates"
}
help_list() {  # the names under SECTION: in `hpclaunch ARGS... --help`
  local section=$1
  shift
  "$hpclaunch" "$@" --help | awk -v s="$section:" '/^[^ ]/ {on = ($0 == s); next}
    on && /^  [^ ]/ {print $1}' | tr ',' '\n' | grep -v '^$' | sort
}
help_flags() {  # every flag in `hpclaunch ARGS... --help`, whatever its group
  "$hpclaunch" "$@" --help | awk '/^[^ ]/ {on = ($0 != "Subcommands:" && $0 != "Positionals:"); next}
    on && /^  -/ {print $1}' | tr ',' '\n' | grep -- '^-' | sort
}
json_names() { "$hpclaunch" "$1" list --json | python3 -c 'import json,sys
print("\n".join(sorted(e["name"] for e in json.load(sys.stdin))))'; }

presets=$(json_names presets)
clusters=$(json_names clusters)
grep -qx my-1n2g <<<"$presets" || fail "presets list does not show the HPCLAUNCH_PATH preset"
expect "verbs" "$(help_list Subcommands)" ""
expect "verbs starting re" "$(printf 'render\nreport\nrerun')" re
expect "render's flags" "$(help_flags render)" render -
expect "sweep's flags from --st" "$(help_flags sweep | grep -- '^--st')" sweep --st
expect "--preset from the catalog" "$presets" render --preset ""
expect "--preset my (HPCLAUNCH_PATH)" my-1n2g run --preset my
expect "-p 2n" "$(grep '^2n' <<<"$presets")" validate -p 2n
expect "--preset=2n (bash splits at =)" "$(grep '^2n' <<<"$presets")" render --preset = 2n
expect "--cluster" "$clusters" submit --cluster ""
expect "clusters show" "$clusters" clusters show ""
expect "clusters diff, second" "$clusters" clusters diff jsc ""
expect "presets show 1n" "$(grep '^1n' <<<"$presets")" presets show 1n
expect "presets' subcommands" "$(help_list Subcommands presets)" presets ""
expect "--strategy" "$(printf 'ddp\nfsdp\nzero1\nzero2')" render --strategy ""
expect "sweep --strategy ddp,z" "$(printf 'ddp,zero1\nddp,zero2')" sweep --strategy ddp,z
expect "--launch" "$(printf 'hpctrain\nsrun\ntorchrun')" run --launch ""
expect "--backend" "$(printf 'local\nslurm\nssh')" run --backend ""
expect "after --: the program's arguments" "" render --preset 1n2g -- --mo
expect "-o FILE: files (bash's default)" "" render -o ""
expect "verbs after a flag that takes no value" "$(help_list Subcommands)" --version ""

# zsh
if ! command -v zsh >/dev/null; then
  [[ ${CI:-} == true ]] && fail "zsh is not installed (scripts/install-deps.sh installs it)"
  echo "WARN: zsh not installed: zsh part skipped"
  exit 0
fi
zsh -n "$source_dir/packaging/completion/_hpclaunch" || fail "zsh -n _hpclaunch"
zsh_complete() {  # zsh_complete WORD...: _hpclaunch with words=(hpclaunch WORD...), CURRENT=last
  zsh -f -c 'compadd() { shift 2; print -l -- "$@"; }; _files() { print -- "<files>"; }
    words=("$@"); CURRENT=$#
    source "$0"' "$source_dir/packaging/completion/_hpclaunch" "$hpclaunch" "$@" | sort
}
[[ $(zsh_complete render --preset 2n) == "$(grep '^2n' <<<"$presets")" ]] ||
  fail "zsh: render --preset 2n gave [$(zsh_complete render --preset 2n | tr '\n' ' ')]"
[[ $(zsh_complete render --launch=t) == --launch=torchrun ]] ||
  fail "zsh: --launch=t gave [$(zsh_complete render --launch=t | tr '\n' ' ')]"
[[ $(zsh_complete render -o "") == "<files>" ]] || fail "zsh: -o should complete files"
[[ $(zsh_complete "") == "$(help_list Subcommands)" ]] || fail "zsh: verbs"
echo "ok: zsh: -n clean; --preset, --launch=, files, verbs through _hpclaunch"
compsys() {  # compsys LINE: the words of LINE after TAB in an interactive zsh with compinit
  PATH="$(dirname "$hpclaunch"):$PATH" timeout 60 zsh -f "$(dirname "$0")/zsh_compsys.zsh" \
    "$source_dir/packaging/completion" "$1"
}
for case in 'hpclaunch render --launch tor|render --launch torchrun' \
  'hpclaunch presets sh|presets show' 'hpclaunch run --preset my-|run --preset my-1n2g' \
  'hpclaunch sweep --strategy ddp,fs|sweep --strategy ddp,fsdp'; do
  line=${case%%|*} expected=${case#*|}
  got=$(compsys "$line" || true)
  [[ $got == "ARGS:$expected" ]] || fail "zsh compsys: '$line<TAB>' gave '$got', expected 'ARGS:$expected'"
done
echo "ok: zsh compsys (zpty, compinit): --launch tor -> torchrun, presets sh -> show, my- -> my-1n2g, ddp,fs -> ddp,fsdp"
