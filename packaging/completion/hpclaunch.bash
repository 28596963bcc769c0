# bash completion for hpclaunch. hpclaunch answers itself (`hpclaunch __complete CWORD WORD...`):
# verbs, flags, and the names of presets, clusters, strategies and launch modes from its catalog,
# so this file never needs to change when they do. Installed as
# PREFIX/share/bash-completion/completions/hpclaunch (bash-completion loads it on first use).
_hpclaunch() {
  local program=${COMP_WORDS[0]}
  # The hpclaunch being completed (./build/launcher/hpclaunch), else the one on PATH.
  if [[ $program != */* || ! -x $program ]]; then
    program=hpclaunch
  fi
  local IFS=$'\n'
  # shellcheck disable=SC2207  # one candidate a line; IFS is a newline
  COMPREPLY=($(command "$program" __complete "$COMP_CWORD" "${COMP_WORDS[@]}" 2>/dev/null))
}
# -o default: file names where hpclaunch has nothing to offer (-o FILE, --grid FILE, a run dir).
complete -o default -F _hpclaunch hpclaunch
