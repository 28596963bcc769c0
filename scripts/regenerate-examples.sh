#!/usr/bin/env bash
# Renders every shape preset x cluster profile x strategy into examples/generated/, and a user's
# program (python train.py) under --launch srun and torchrun on 2n2g for every cluster: the golden
# files a reviewer reads. The test examples:golden re-renders them and fails when a template or
# preset changed without regenerating:
#   scripts/regenerate-examples.sh [--hpclaunch BIN]            rewrite examples/generated
#   scripts/regenerate-examples.sh [--hpclaunch BIN] --check    compare, change nothing
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${repo}/build/launcher/hpclaunch"
check=0
while (($#)); do
  case "$1" in
    --hpclaunch) bin="$2"; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "usage: $0 [--hpclaunch BIN] [--check]" >&2; exit 2 ;;
  esac
done
[[ -x "${bin}" ]] || { echo "$0: no hpclaunch binary at ${bin}; build first or pass --hpclaunch" >&2; exit 2; }
bin="$(realpath "${bin}")"

# Only the built-in presets: no user directories, no project file.
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
export HPCLAUNCH_DATA_DIR="${repo}" XDG_CONFIG_HOME="${work}/no-config" HPCLAUNCH_PATH=""

# The workshop recipe (GPT-2 124M on FineWeb-Edu), as a reviewer would pass it.
trainer_args=(--model gpt2 --data /path/to/edu_fineweb10B --total-batch-tokens 524288
  --micro-batch 16 --seq-len 1024 --max-steps 19073)
# What profiles require (account, QoS, memory) gets a placeholder: --set KEY=VALUE, space-separated.
declare -A cluster_flags=(
  [baskerville]="profile.account=myproject profile.qos=myqos"
  [daic]="profile.account=mygroup"
  [jsc]="profile.account=myproject")

out="${work}/generated"
mkdir -p "${out}"
rejected="${out}/REJECTED.txt"
echo "# Combinations hpclaunch refuses, with its message (regenerate-examples.sh)." >"${rejected}"
mapfile -t presets < <("${bin}" presets list --json | sed -n 's/^ *"name": "\(.*\)",\{0,1\}$/\1/p')
mapfile -t clusters < <("${bin}" clusters list --json | sed -n 's/^ *"name": "\(.*\)",\{0,1\}$/\1/p')
for cluster in "${clusters[@]}"; do
  mkdir -p "${out}/${cluster}"
  set_args=()
  for assignment in ${cluster_flags[${cluster}]:-}; do set_args+=(--set "${assignment}"); done
  for preset in "${presets[@]}"; do
    for strategy in ddp fsdp zero1 zero2; do
      args=(render --no-project --preset "${preset}" --cluster "${cluster}" --strategy "${strategy}"
        "${set_args[@]}" -- "${trainer_args[@]}")
      status=0
      (cd "${work}" && "${bin}" "${args[@]}") >"${out}/${cluster}/${preset}-${strategy}.sbatch" \
        2>"${work}/err" || status=$?
      if ((status == 2)); then # refused as bad input: record why
        rm -f "${out}/${cluster}/${preset}-${strategy}.sbatch"
        echo "${cluster} ${preset} ${strategy}: $(cat "${work}/err")" >>"${rejected}"
      elif ((status != 0)); then
        cat "${work}/err" >&2
        exit 1
      fi
    done
  done
  # A user's own program under each launch mode (docs/programs.md): 2n2g fits every profile.
  for launch in srun torchrun; do
    args=(render --no-project --preset 2n2g --cluster "${cluster}" --launch "${launch}"
      "${set_args[@]}" -- python train.py --lr 3e-4)
    (cd "${work}" && "${bin}" "${args[@]}") >"${out}/${cluster}/2n2g-launch-${launch}.sbatch"
  done
done

# One script per container runtime (docs/programs.md, "Containers"), each in another launch
# mode: 2n4g on generic, the tasks' program in the image, the data bound in.
mkdir -p "${out}/containers"
container_mount='container.mounts=["/scratch/me/edu_fineweb10B:/data"]'
render_container() { # NAME RUNTIME IMAGE ARGS...
  local name="$1" runtime="$2" image="$3"
  shift 3
  (cd "${work}" && "${bin}" render --no-project --preset 2n4g --cluster generic \
    --set "container.runtime=${runtime}" --container "${image}" --set "${container_mount}" \
    "$@") >"${out}/containers/${name}.sbatch"
}
render_container 2n4g-pyxis-hpctrain pyxis 'nvcr.io#nvidia/pytorch:24.01-py3' --strategy ddp \
  -- --model gpt2 --data /data --max-steps 19073
render_container 2n4g-apptainer-srun apptainer /scratch/me/pytorch.sif --launch srun \
  -- python train.py --data /data
render_container 2n4g-charliecloud-torchrun charliecloud /scratch/me/pytorch-image \
  --launch torchrun -- train.py --data /data

dest="${repo}/examples/generated"
if ((check)); then
  if ! diff -r "${dest}" "${out}" >"${work}/diff"; then
    head -n 40 "${work}/diff" >&2
    echo "examples/generated is out of date: run scripts/regenerate-examples.sh and commit the result" >&2
    exit 1
  fi
  echo "examples/generated: $(find "${out}" -name '*.sbatch' | wc -l) scripts up to date"
else
  rm -rf "${dest}"
  mkdir -p "$(dirname "${dest}")"
  cp -r "${out}" "${dest}"
  echo "wrote $(find "${dest}" -name '*.sbatch' | wc -l) scripts to examples/generated"
fi
