#!/usr/bin/zsh -f
# Completes a command line with zsh's real completion system (compsys) in an interactive zsh on a
# pseudo-terminal (zpty), as a user pressing TAB would, then runs it and prints its words.
#   zsh_compsys.zsh FPATH_DIR 'hpclaunch render --launch tor'
# prints "ARGS:render --launch torchrun". hpclaunch (on PATH) answers the completion; the line
# runs a function of the same name that only prints its arguments.
zmodload zsh/zpty || exit 1
fpath_dir=$1 line=$2
zpty z zsh -f -i
zpty -w z "PS1='> '; fpath=(${(q)fpath_dir} \$fpath); autoload -U compinit; compinit -u -D; hpclaunch() { print -r -- \"ARGS:\$*\" }"
zpty -w -n z "${line}"$'\t\n'
out=""
for i in {1..200}; do  # up to 20 s: compinit and hpclaunch on a busy machine
  if zpty -r -t z chunk; then
    out+=$chunk
    [[ $out == *ARGS:[^\$]*$'\n'* ]] && break
  else
    sleep 0.1
  fi
done
zpty -d z
print -r -- "$out" | tr -d '\r' | grep -a '^ARGS:' | grep -v 'ARGS:\$'
