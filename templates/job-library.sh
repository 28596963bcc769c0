# --- hpclaunch job library ----------------------------------------------------------------------
# The machinery that main() above calls, the same in every script this version of hpclaunch
# renders, whatever the preset, cluster, launch mode or strategy: `diff` of two scripts shows only
# what differs between their jobs. Not a template (hpclaunch appends it as built; docs/templates.md).
# Nothing here reads a value of the job's spec: main() passes each one as an argument.

# shellcheck disable=SC2317 # a function this job's main() does not call is not dead code
{
# Set where the script decides (node check, requeue); read by the EXIT trap and the launch.
hpc_timeline=""
hpc_timeline_why=""
hpc_timeline_detail=""
hpc_timeline_signal=""
hpc_run_id=""
hpc_record_pid=""
hpc_srun_pid=""
hpc_requeue_signal=""
hpc_stop_sent=""
hpc_check_requeues=0

# hpc_job_start --mem|--mem-per-cpu|--mem-per-gpu|--no-mem: the job's first step. Stops a script
# run outside Slurm; clears what another allocation left in the environment (the option names
# the job's own memory request, whose variable Slurm sets again); names the run directory's
# files; starts the timeline.
hpc_job_start() {
  if [[ -z "${SLURM_JOB_ID:-}" || -z "${SLURM_JOB_NODELIST:-}" ]]; then
    echo "hpclaunch: not inside a Slurm job (SLURM_JOB_ID or SLURM_JOB_NODELIST is unset): submit this script with \`sbatch FILE\` or \`hpclaunch submit\`, do not run it with bash" >&2
    exit 2
  fi
  # srun 22.05 to 23.02 does not take --cpus-per-task from the job, but reads SRUN_CPUS_PER_TASK
  # (docs/slurm-versions.md): an srun that the program or the setup lines start gets the job's
  # count from here. This script's own srun lines pass it as a flag, which wins over both.
  export SRUN_CPUS_PER_TASK="${SLURM_CPUS_PER_TASK:-1}"
  # Submitted by hand from inside another allocation (an salloc shell, a notebook that is a job),
  # the job inherits that allocation's memory and TRES variables, which srun reads as its own
  # options ("SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually
  # exclusive"). Slurm sets again the one this job asks for; the others are not this job's.
  local option variable
  for option in --mem-per-cpu=SLURM_MEM_PER_CPU --mem-per-gpu=SLURM_MEM_PER_GPU \
    --mem=SLURM_MEM_PER_NODE; do
    variable=${option#*=}
    [[ "$1" == "${option%%=*}" ]] || unset "${variable}"
  done
  case ",${SLURM_TRES_PER_TASK:-}," in
    ,, | *",cpu:${SLURM_CPUS_PER_TASK:-1},"*) ;;
    *) unset SLURM_TRES_PER_TASK ;; # another allocation's CPUs per task
  esac
  # The tasks get this shell's environment (MASTER_ADDR, the NCCL variables) only if srun exports
  # all of it. A site's SBATCH_EXPORT=NONE makes Slurm set SLURM_EXPORT_ENV=NONE in the job, and
  # srun then starts the tasks with SLURM_* alone (man sbatch, --export=NONE: "the environment
  # variable SLURM_EXPORT_ENV should be set to ALL in the job script"). The launch's srun says
  # --export=ALL as well.
  export SLURM_EXPORT_ENV=ALL
  # `hpclaunch run` gives each run a directory; the trainer writes its metrics there so that the
  # launcher can show the step and tokens/s while it follows the job (and bench-allreduce its
  # table, which `hpclaunch tune` reads). A task of a job array has its own directory, named by
  # the array's id and the task index.
  if [[ -n "${HPCLAUNCH_RUN_DIR_PREFIX:-}" ]]; then
    hpc_run_id="${SLURM_JOB_ID}"
    if [[ -n "${SLURM_ARRAY_TASK_ID:-}" ]]; then
      hpc_run_id="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
    fi
    export HPCTRAIN_METRICS="${HPCLAUNCH_RUN_DIR_PREFIX}${hpc_run_id}/metrics.jsonl"
    export HPCTRAIN_BENCH_JSON="${HPCLAUNCH_RUN_DIR_PREFIX}${hpc_run_id}/allreduce.json"
    # Hang detection (job.hang_seconds): each rank's progress, read by `hpclaunch run`/`logs -f`:
    # hpctrain's files, or the heartbeat-RANK files a program of one's own may write there (any
    # change is progress; the folder is made beside the launch, hpc_log_marks).
    export HPCTRAIN_PROGRESS_DIR="${HPCLAUNCH_RUN_DIR_PREFIX}${hpc_run_id}/progress"
    export HPCLAUNCH_HEARTBEAT_DIR="${HPCTRAIN_PROGRESS_DIR}"
    hpc_timeline="${HPCLAUNCH_RUN_DIR_PREFIX}${hpc_run_id}/timeline.jsonl"
  fi
  hpc_timeline_event start job_id "${SLURM_JOB_ID}" nodelist "${SLURM_JOB_NODELIST}" \
    nodes "${SLURM_JOB_NUM_NODES:-}" tasks "${SLURM_NTASKS:-}" \
    gpus_per_node "${SLURM_GPUS_ON_NODE:-0}" cpus_per_node "${SLURM_JOB_CPUS_PER_NODE:-}"
  trap hpc_job_end EXIT
}

# --- timeline (hpclaunch report: goodput across requeues; docs/goodput.md) ----------------------
# Slurm's accounting (sacct) may be absent or closed to users, so the job keeps its own record:
# a line of JSON in <run dir>/timeline.jsonl when each run of the job starts, and one when it
# ends (its exit status and why: completed, requeued and on which signal, failed). A requeued
# job appends to the same file. No command here runs in a subshell: the TERM that reaches every
# process of the job as it ends (a requeue, preemption) would kill one and leave a broken line.

# VAR VALUE: VAR is set to VALUE as a JSON string: printable ASCII, tab and newline are kept (\ and "
# escaped), any other byte is dropped.
hpc_json_string() {
  local LC_ALL=C s=$2
  s=${s//[^$'\t\n' -~]/}
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  printf -v "$1" '"%s"' "${s}"
}

# EVENT [KEY VALUE]...: one line with the time (Unix seconds, and UTC to the millisecond) and
# this run's restart count; each VALUE a JSON string, or a number for a KEY written %KEY. A
# failed write is reported, not fatal.
hpc_timeline_event() {
  [[ -n "${hpc_timeline}" ]] || return 0
  local now utc frac line key value restart=${SLURM_RESTART_COUNT:-0}
  [[ "${restart}" =~ ^[0-9]+$ ]] || restart=0
  if [[ -n "${EPOCHREALTIME:-}" ]]; then
    now=${EPOCHREALTIME/,/.} # bash 5 (with the locale's decimal mark)
  else
    now=$(date -u +%s.%N) || return 0 # bash 4
  fi
  TZ=UTC0 printf -v utc '%(%Y-%m-%dT%H:%M:%S)T' "${now%.*}"
  frac=${now#*.}
  line="{\"event\":\"$1\",\"time\":${now},\"utc\":\"${utc}.${frac:0:3}Z\",\"restart\":${restart}"
  shift
  while (($# >= 2)); do
    key=$1 value=$2
    shift 2
    if [[ "${key}" == %* ]]; then
      [[ "${value}" =~ ^-?[0-9]+$ ]] || value=null
      line+=",\"${key#%}\":${value}"
    else
      hpc_json_string value "${value}"
      line+=",\"${key}\":${value}"
    fi
  done
  printf '%s}\n' "${line}" >>"${hpc_timeline}" ||
    echo "hpclaunch: could not append to ${hpc_timeline} (hpclaunch report reads it)" >&2
}

# shellcheck disable=SC2317 # run by the EXIT trap
hpc_job_end() {
  local status=$? waited=0
  if [[ -z "${hpc_timeline_why}" ]]; then
    hpc_timeline_why=completed
    ((status == 0)) || hpc_timeline_why=failed
  fi
  hpc_timeline_event end %exit "${status}" why "${hpc_timeline_why}" \
    signal "${hpc_timeline_signal}" detail "${hpc_timeline_detail}"
  # The run record's probes (hpc_record_start) may still run after a short job: give them up
  # to 20 s, after which the end of the job ends them.
  while [[ -n "${hpc_record_pid}" ]] && kill -0 "${hpc_record_pid}" 2>/dev/null &&
    ((waited < 200)); do
    sleep 0.1
    waited=$((waited + 1))
  done
}

# --- modules -------------------------------------------------------------------------------------
# `module` is a shell function that the site's /etc/profile.d defines for login shells; a batch
# shell, or one reached over SSH, may lack it: then the first module init found is sourced
# (profile.lmod_init first, given as hpc_module_init LMOD_INIT).
hpc_module_inits=(
  /etc/profile.d/lmod.sh
  ${LMOD_PKG:+"${LMOD_PKG}/init/bash"}
  /usr/share/lmod/lmod/init/bash
  /etc/profile.d/modules.sh
  /usr/share/Modules/init/bash
)
hpc_module_init() {
  hpc_module_inits=("$1" "${hpc_module_inits[@]}")
}

# hpc_module ARGS...: `module ARGS...` with a message naming profile.modules when it fails. Lmod's
# shell functions read unset variables, so -u is relaxed while they run.
hpc_module() {
  local init
  set +u
  if ! type module >/dev/null 2>&1; then
    for init in "${hpc_module_inits[@]}"; do
      if [[ -r "${init}" ]]; then
        # shellcheck disable=SC1090 # the site's module init, found when the job runs
        source "${init}"
        break
      fi
    done
    if ! type module >/dev/null 2>&1; then
      echo "hpclaunch: profile.modules needs the 'module' command, but this shell has none and no init script was found (tried: ${hpc_module_inits[*]}); set profile.lmod_init to the site's (see docs/programs.md)" >&2
      exit 1
    fi
  fi
  if ! module "$@"; then
    if [[ "$*" == *purge ]]; then
      echo "hpclaunch: 'module $*' failed (profile.module_purge)" >&2
    elif [[ "$1" == use ]]; then
      echo "hpclaunch: 'module use' failed for ${*:2} (profile.modules)" >&2
    else
      echo "hpclaunch: 'module $1' failed for ${*:2} (profile.modules); 'module spider NAME' on the cluster shows the right name" >&2
      if [[ "${2:-}" == Stages/* ]]; then
        echo "hpclaunch: a stage that is no longer current loads only after 'module use \$OTHERSTAGES': put \"use:\$OTHERSTAGES\" before it in profile.modules (docs/clusters.md, the jsc profile)" >&2
      fi
    fi
    exit 1
  fi
  set -u
}

# --- Python environments -------------------------------------------------------------------------
# hpc_venv DIR: activates the virtualenv at DIR (profile.python.venv, a path on the cluster).
hpc_venv() {
  if [[ ! -r "$1/bin/activate" ]]; then
    echo "hpclaunch: profile.python.venv: no virtualenv at $1 on $(hostname) (no bin/activate); create it there: python3 -m venv $1" >&2
    exit 1
  fi
  set +u # activate reads unset variables
  # shellcheck disable=SC1091 # the virtualenv's own script, on the cluster
  source "$1/bin/activate"
  set -u
}

# hpc_conda ENV: activates the conda environment ENV (profile.python.conda, a name or a path).
hpc_conda() {
  local hook
  set +u # conda's shell functions read unset variables
  if ! command -v conda >/dev/null 2>&1 && [[ -z "${CONDA_EXE:-}" ]]; then
    echo "hpclaunch: profile.python.conda: this shell has no conda; load the site's conda module (profile.modules) or put conda on the PATH" >&2
    exit 1
  fi
  # A batch shell has not read ~/.bashrc, where `conda init` puts conda's shell functions.
  if ! hook="$("${CONDA_EXE:-conda}" shell.bash hook)"; then
    echo "hpclaunch: profile.python.conda: 'conda shell.bash hook' failed" >&2
    exit 1
  fi
  eval "${hook}"
  if ! conda activate "$1"; then
    echo "hpclaunch: profile.python.conda: 'conda activate $1' failed; 'conda env list' on the cluster shows the environments" >&2
    exit 1
  fi
  set -u
}

# hpc_passed NAME...: stops unless each variable reached the job. hpclaunch passed them by name
# (sbatch --export=...,NAME; job.env_from_submit): their values are in no file.
hpc_passed() {
  local name
  for name in "$@"; do
    if [[ -z "${!name+set}" ]]; then
      echo "hpclaunch: ${name} (job.env_from_submit) did not reach the job; submit with hpclaunch run/submit from a shell where it is set" >&2
      exit 1
    fi
  done
}

# hpc_nccl_p2p_auto: NCCL_P2P_DISABLE=auto. GPUs whose link in `nvidia-smi topo -m` is SYS (across
# NUMA nodes) hang NCCL's peer-to-peer transport after "All distributed processes registered";
# disable it there and keep it elsewhere. Decided once, on the first node, for every rank.
hpc_nccl_p2p_auto() {
  # The header row names the GPU columns; a GPU row with SYS in a GPU column means a SYS link.
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m 2>/dev/null | awk '
    !header && /GPU0/ { header = 1; for (i = 1; i <= NF; i++) if ($i ~ /^GPU[0-9]+$/) gpu[i + 1] = 1; next }
    header && $1 ~ /^GPU[0-9]+$/ { for (c in gpu) if ($c == "SYS") sys = 1 }
    END { exit !sys }'; then
    export NCCL_P2P_DISABLE=1
  else
    export NCCL_P2P_DISABLE=0
  fi
  echo "hpclaunch: NCCL_P2P_DISABLE=${NCCL_P2P_DISABLE} (auto, from nvidia-smi topo -m)" >&2
}

# --- rendezvous ----------------------------------------------------------------------------------
# hpc_rendezvous SUFFIX name|resolve PORT_MIN PORT_MAX: exports MASTER_ADDR, the first host of the
# allocation plus SUFFIX (profile.ib_suffix), resolved to an address with "resolve" so that every
# rank dials the same interface; on one node the loopback, with no name to resolve. Exports
# MASTER_PORT = PORT_MIN + SLURM_JOB_ID mod (PORT_MAX - PORT_MIN + 1): the same on every rank and
# after a requeue, and different for jobs sharing a node unless their ids differ by a multiple of
# the span.
hpc_hosts=()
hpc_master_host=""
hpc_rendezvous() {
  local suffix=$1 how=$2 port_min=$3 port_max=$4 master_ip node_addr
  mapfile -t hpc_hosts < <(scontrol show hostnames "${SLURM_JOB_NODELIST}")
  if ((${#hpc_hosts[@]} == 0)); then
    echo "hpclaunch: scontrol could not expand SLURM_JOB_NODELIST='${SLURM_JOB_NODELIST}'" >&2
    exit 1
  fi
  hpc_master_host="${hpc_hosts[0]}${suffix}"
  if ((${#hpc_hosts[@]} == 1)); then
    MASTER_ADDR=127.0.0.1
  elif [[ "${how}" != resolve ]]; then
    MASTER_ADDR="${hpc_master_host}"
  elif ! MASTER_ADDR="$(getent ahostsv4 "${hpc_master_host}" | awk 'NR == 1 { print $1 }')" ||
    [[ -z "${MASTER_ADDR}" ]]; then
    echo "hpclaunch: MASTER_ADDR: host '${hpc_master_host}' does not resolve (getent ahostsv4)." >&2
    echo "hpclaunch: check profile.ib_suffix ('${suffix}') and the cluster's DNS; see docs/troubleshooting.md" >&2
    exit 1
  fi
  # A loopback MASTER_ADDR on several nodes (a "127.0.1.1 HOST" line in the first node's
  # /etc/hosts, as Debian and Ubuntu write it) makes rank 0 listen where no other node can reach
  # it, and the job hangs at the rendezvous. Refused, unless Slurm itself reaches the first node
  # at a loopback address (several slurmd on one machine).
  if ((${#hpc_hosts[@]} > 1)); then
    master_ip="${MASTER_ADDR}"
    if [[ ! "${master_ip}" =~ ^[0-9.]+$ ]]; then
      master_ip="$(getent ahostsv4 "${MASTER_ADDR}" | awk 'NR == 1 { print $1 }')" || master_ip=""
    fi
    node_addr=""
    if [[ "${master_ip}" == 127.* ]]; then
      node_addr="$(scontrol show node -o "${hpc_hosts[0]}" | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')" || node_addr=""
    fi
    if [[ "${master_ip}" == 127.* && "${node_addr}" != 127.* ]]; then
      echo "hpclaunch: MASTER_ADDR ${MASTER_ADDR} (${hpc_master_host}) is a loopback address (${master_ip}) on a ${#hpc_hosts[@]}-node job: the other nodes cannot reach it; fix ${hpc_master_host}'s line in /etc/hosts (Debian's 127.0.1.1) or set profile.ib_suffix to a name that resolves to the node's network address (docs/troubleshooting.md)" >&2
      exit 1
    fi
  fi
  export MASTER_ADDR
  export MASTER_PORT=$((port_min + SLURM_JOB_ID % (port_max - port_min + 1)))
  echo "hpclaunch: job ${SLURM_JOB_ID}: ${SLURM_JOB_NUM_NODES:-?} node(s), MASTER_ADDR=${MASTER_ADDR} (${hpc_master_host}) MASTER_PORT=${MASTER_PORT}" >&2
}

# --- node check before training (job.preflight; docs/node-check.md) -----------------------------
# hpc_node_check PROGRAM MARGIN_PERCENT TIMEOUT CPUS_PER_NODE: one task per node runs
# `PROGRAM node-check`: a timed GEMM on the node's device and an exchange with every other node. A
# node below the median by more than MARGIN_PERCENT % is slow: the job requeues itself once
# without it (scontrol requeuehold, then ExcNodeList, then release: Slurm changes the node list of
# a pending job only) and says so in one line. Skipped on one node, after that requeue, and where
# PROGRAM is missing; a check that fails or runs over TIMEOUT s is reported and training goes on.
hpc_node_check() {
  local program=$1 margin=$2 timeout=$3 cpus=$4 requeued slow status=0 fraction
  local name why slow_list slow_line excluded nodes_left node node_state
  local -a slow_nodes=() slow_figures=() excluded_nodes=()
  fraction=$(printf '0.%02d' "${margin}") # 1..99 percent as hpctrain's --margin
  if [[ -n "${HPCLAUNCH_RUN_DIR_PREFIX:-}" ]]; then
    requeued="${HPCLAUNCH_RUN_DIR_PREFIX}${SLURM_JOB_ID}/node-check-requeued"
    slow="${HPCLAUNCH_RUN_DIR_PREFIX}${SLURM_JOB_ID}/node-check-slow.txt"
  else
    requeued="${PWD}/.hpclaunch-node-check-requeued-${SLURM_JOB_ID}"
    slow="${PWD}/.hpclaunch-node-check-slow-${SLURM_JOB_ID}.txt"
  fi
  # The check's requeue is not one of job.max_requeues.
  if [[ -e "${requeued}" ]]; then
    hpc_check_requeues=1
  fi
  rm -f -- "${slow}" # what an earlier run of this job found is not this run's verdict
  if ((${#hpc_hosts[@]} < 2)); then
    echo "hpclaunch: node check: skipped (one node, no other to compare it with)" >&2
  elif ((hpc_check_requeues)); then
    echo "hpclaunch: node check: skipped (the job was requeued for it once already)" >&2
  elif ! command -v "${program}" >/dev/null 2>&1; then
    echo "hpclaunch: node check: skipped: '${program}' not found on $(hostname); set job.preflight.hpctrain to hpctrain's path on the cluster (docs/node-check.md)" >&2
  else
    OMP_NUM_THREADS="${cpus}" timeout --kill-after=10 "${timeout}" srun --export=ALL \
      --kill-on-bad-exit=1 --ntasks="${#hpc_hosts[@]}" --ntasks-per-node=1 \
      --cpus-per-task="${cpus}" --label "${program}" node-check \
      --margin "${fraction}" --slow-nodes-file "${slow}" || status=$?
  fi
  if ((status != 0)); then
    echo "hpclaunch: node check: failed or ran over ${timeout} s (status ${status}); training goes on on these nodes" >&2
    return 0
  fi
  [[ -s "${slow}" ]] || return 0
  while read -r name why; do
    slow_nodes+=("${name}")
    slow_figures+=("${name} ${why}")
  done <"${slow}"
  slow_list="$(IFS=,; echo "${slow_nodes[*]}")"
  slow_line="hpclaunch: node check: slow node(s) ${slow_list} ($(IFS=';'; echo "${slow_figures[*]}"))"
  # Excluded already (the user's --exclude) plus the slow ones, and how many nodes that leaves in
  # the partition (not down, drained or failed).
  excluded="$(scontrol show job "${SLURM_JOB_ID}" | sed -n 's/.*ExcNodeList=\([^ ]*\).*/\1/p')" || excluded=""
  if [[ "${excluded}" == "(null)" ]]; then
    excluded=""
  fi
  excluded="${excluded:+${excluded},}${slow_list}"
  mapfile -t excluded_nodes < <(scontrol show hostnames "${excluded}")
  nodes_left=0
  while read -r node node_state; do
    if [[ "${node_state}" =~ down|drain|drng|fail|maint ]] ||
      [[ " ${excluded_nodes[*]} " == *" ${node} "* ]]; then
      continue
    fi
    nodes_left=$((nodes_left + 1))
  done < <(sinfo -h -N -p "${SLURM_JOB_PARTITION:-}" -o '%N %t' | sort -u)
  if ((nodes_left < ${#hpc_hosts[@]})); then
    echo "${slow_line}: not requeued: without them partition ${SLURM_JOB_PARTITION:-?} has ${nodes_left} usable node(s), the job needs ${#hpc_hosts[@]}; training goes on on these nodes" >&2
    return 0
  fi
  echo "${slow_line}: requeueing job ${SLURM_JOB_ID} once without them" >&2
  echo "${slow_list}" >"${requeued}"
  # The requeue ends this script (TERM, then KILL after KillWait): finish the three commands.
  trap '' TERM
  hpc_timeline_why=node_check_requeue hpc_timeline_detail="${slow_list}"
  if scontrol requeuehold "${SLURM_JOB_ID}"; then
    if ! scontrol update "JobId=${SLURM_JOB_ID}" "ExcNodeList=${excluded}"; then
      echo "hpclaunch: node check: scontrol update ExcNodeList failed: the job runs again on any nodes" >&2
    fi
    if ! scontrol release "${SLURM_JOB_ID}"; then
      echo "hpclaunch: node check: scontrol release failed: the job stays held; release it with: scontrol release ${SLURM_JOB_ID}" >&2
    fi
    exit 0
  fi
  trap - TERM
  hpc_timeline_why="" hpc_timeline_detail=""
  rm -f -- "${requeued}"
  echo "hpclaunch: node check: scontrol requeuehold ${SLURM_JOB_ID} failed (a --no-requeue job, or JobRequeue=0 on this cluster?): training goes on on these nodes" >&2
}

# --- preemption and time limit (docs/backends.md#requeue) ---------------------------------------
# hpc_requeue_on SIGNAL MAX_REQUEUES: a stop reaches the tasks in one of three ways, and the
# answer is the same: every task finishes its step and the checkpoint is written; once it is whole
# the program writes the requeue marker (HPCLAUNCH_REQUEUE_MARKER, below) and exits; this script
# then requeues the job (hpc_launch), at most MAX_REQUEUES times.
# - SIGNAL to this shell before the time limit (#SBATCH --signal=B:SIGNAL@SECONDS, job.signal);
#   `scancel --signal=SIGNAL --batch JOBID` does the same by hand. The trap forwards SIGNAL to
#   srun, which passes it to the tasks.
# - TERM to the tasks: preemption (PreemptMode=REQUEUE or CANCEL with a GraceTime: Slurm sends
#   TERM to the job's steps, then after GraceTime TERM and, KillWait seconds later, KILL) or
#   `scancel --signal=TERM JOBID`. The tasks see it themselves.
# - TERM to this shell only (`scancel --signal=TERM --batch JOBID`): forwarded as SIGNAL.
#   (TERM to srun itself ends the step at once with KILL: `scancel --full` and plain `scancel`
#   cannot be answered with a checkpoint.)
# hpctrain answers SIGNAL and TERM: finish the step, checkpoint, write the marker, exit 75. Another
# program that wants to be requeued handles SIGNAL and TERM, writes its checkpoint, then on one
# rank writes the marker (a line "restart=N", N = SLURM_RESTART_COUNT or 0, written to a temporary
# file and renamed onto the marker) and exits. The job keeps its id, run directory and log
# (--open-mode=append), and the program resumes because SLURM_RESTART_COUNT >= 1.
hpc_requeue_on() {
  hpc_requeue_signal=$1
  hpc_max_requeues=$2
  hpc_restarts="${SLURM_RESTART_COUNT:-0}"
  if ((hpc_restarts > 0)); then
    echo "hpclaunch: job ${SLURM_JOB_ID}: restart ${hpc_restarts} of at most ${hpc_max_requeues}; the program resumes from its checkpoint" >&2
  fi
  # The marker: in the run directory under `hpclaunch run`, else beside the job's log; written
  # anew by each run of the job (restart=N names it), so an old one is removed first.
  if [[ -n "${HPCLAUNCH_RUN_DIR_PREFIX:-}" ]]; then
    export HPCLAUNCH_REQUEUE_MARKER="${HPCLAUNCH_RUN_DIR_PREFIX}${SLURM_JOB_ID}/requeue-marker"
  else
    export HPCLAUNCH_REQUEUE_MARKER="${PWD}/.hpclaunch-requeue-${SLURM_JOB_ID}"
  fi
  rm -f -- "${HPCLAUNCH_REQUEUE_MARKER}"
  hpc_stop=""
  # shellcheck disable=SC2064 # the signal's name, fixed now
  trap "hpc_forward_stop ${hpc_requeue_signal}" "${hpc_requeue_signal}"
  trap 'hpc_forward_stop TERM' TERM
}

# shellcheck disable=SC2317 # run by the traps of hpc_requeue_on
hpc_forward_stop() {
  hpc_trapped=1
  # Asked once, the tasks are saving: a later stop (the TERM of a requeue that the program runs
  # itself, as Lightning does; a preemption after the time-limit signal) is not passed on, or
  # they would save a second time while Slurm's KillWait runs out.
  if [[ -n "${hpc_stop_sent}" ]]; then
    echo "hpclaunch: $1: the tasks were asked to checkpoint on ${hpc_stop_sent} already: not asked again" >&2
    return 0
  fi
  hpc_stop=$1
  # The timeline notes the first stop, before the script decided: the TERM that the script's own
  # requeue brings (or one during the end) is not a cause.
  if [[ -z "${hpc_timeline_signal}" && -z "${hpc_timeline_why}" ]]; then
    hpc_timeline_signal=$1
    hpc_timeline_event stop signal "$1"
  fi
  echo "hpclaunch: $1: asking the tasks to checkpoint (finish the step, save, write the requeue marker)" >&2
  if [[ -n "${hpc_srun_pid}" ]] && kill "-${hpc_requeue_signal}" "${hpc_srun_pid}" 2>/dev/null; then
    hpc_stop_sent=$1
  fi
}

# The marker decides, not srun's status: that depends on the Slurm version and on which rank
# --kill-on-bad-exit ends first. A marker naming this run (restart=N) says the checkpoint is
# whole and the program asks to be run again.
hpc_requeue_if_asked() {
  local marker=""
  if [[ -f "${HPCLAUNCH_REQUEUE_MARKER}" ]]; then
    read -r marker <"${HPCLAUNCH_REQUEUE_MARKER}" || true
  fi
  if [[ "${marker}" == "restart=${hpc_restarts}" || "${marker}" == "restart=${hpc_restarts} "* ]]; then
    echo "hpclaunch: requeue marker: ${marker} (tasks ended with status ${hpc_status})" >&2
    hpc_timeline_detail="${marker}" # the marker names the checkpoint
    if ((hpc_restarts >= hpc_max_requeues + hpc_check_requeues)); then
      hpc_timeline_why=requeue_limit
      echo "hpclaunch: job ${SLURM_JOB_ID} stopped for a requeue, but it was requeued ${hpc_restarts} time(s) already (job.max_requeues = ${hpc_max_requeues}): the job fails; resume it from its checkpoint with a new job (--resume auto) or raise job.max_requeues" >&2
      exit 75
    fi
    echo "hpclaunch: requeueing job ${SLURM_JOB_ID} (restart $((hpc_restarts + 1)) of at most ${hpc_max_requeues}); it resumes from the checkpoint" >&2
    hpc_timeline_why=requeued
    if ! scontrol requeue "${SLURM_JOB_ID}"; then
      hpc_timeline_why=requeue_failed
      echo "hpclaunch: scontrol requeue ${SLURM_JOB_ID} failed (a --no-requeue job, or JobRequeue=0 on this cluster?): the job fails; resume it from its checkpoint with a new job (--resume auto)" >&2
      exit 75
    fi
    exit 0
  fi
  if [[ -n "${hpc_stop}" || "${hpc_status}" == 75 ]]; then
    hpc_timeline_why=stopped_no_marker
    echo "hpclaunch: ${hpc_stop:-a stop}: the tasks ended with status ${hpc_status} and wrote no requeue marker for restart ${hpc_restarts} (${HPCLAUNCH_REQUEUE_MARKER}): no requeue" >&2
  fi
}

# --- launch --------------------------------------------------------------------------------------
# Launch words that run in each task before the program.
# hpc_rank_env LOCAL_WORLD_SIZE PROGRAM...: torch.distributed's env:// variables from Slurm's:
# RANK = SLURM_PROCID, LOCAL_RANK = SLURM_LOCALID, WORLD_SIZE = SLURM_NTASKS, LOCAL_WORLD_SIZE,
# NODE_RANK = SLURM_NODEID (MASTER_ADDR and MASTER_PORT come from hpc_rendezvous); then the
# program replaces the task's bash, so it receives job.signal and TERM itself.
# shellcheck disable=SC2016,SC2034 # expanded by each task's bash; used by a launch srun job
hpc_rank_env=(bash -c 'export RANK="${SLURM_PROCID}" LOCAL_RANK="${SLURM_LOCALID}" WORLD_SIZE="${SLURM_NTASKS}" LOCAL_WORLD_SIZE="$1" NODE_RANK="${SLURM_NODEID}"; shift; exec -- "$@"' hpc-task)
# hpc_torchrun_node RDZV_CONF TORCHRUN...: torchrun with RDZV_CONF plus is_host=1 on node 0 and
# is_host=0 elsewhere (in PET_RDZV_CONF, which torchrun reads for --rdzv_conf). Which node's agent
# serves the rendezvous store is decided in each task from SLURM_NODEID: torchrun would host it
# only where MASTER_ADDR matches the node's own host name or addresses, which an InfiniBand name's
# address does not (JSC's jwb0001i): then no node hosts it and every agent times out (the JSC
# course passes is_host alike; pytorch#73656).
# shellcheck disable=SC2016,SC2034 # expanded by each task's bash; used by a torchrun job
hpc_torchrun_node=(bash -c 'c=$1; shift; [[ $c == *is_host=* ]] || c+="${c:+,}is_host=$((SLURM_NODEID == 0 ? 1 : 0))"; PET_RDZV_CONF=$c exec "$@"' torchrun-node)

# hpc_container_gpus_auto: gpus "auto" of a container: --nv (the host's NVIDIA driver and
# libraries in the container) where this node has nvidia-smi; without it the image runs on the CPU.
hpc_container_gpus_auto() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    hpc_container+=(--nv)
  fi
}

# hpc_launch COMMAND...: runs the launch (srun ...) beside this shell, which waits for it and
# forwards the requeue signal to it (hpc_requeue_on); then requeues the job if the program asked,
# and exits with the launch's status.
hpc_launch() {
  hpc_timeline_event launch # the environment is ready: modules, venv, rendezvous (start-up budget)
  "$@" &
  hpc_srun_pid=$!
  if [[ -n "${hpc_timeline}" ]]; then
    hpc_log_marks </dev/null &
  fi
  # A trapped signal ends `wait` early (status > 128) without collecting srun: wait again.
  while true; do
    hpc_status=0
    hpc_trapped=0
    wait "${hpc_srun_pid}" || hpc_status=$?
    ((hpc_trapped && hpc_status > 128)) || break
  done
  if [[ -n "${hpc_requeue_signal}" ]]; then
    hpc_requeue_if_asked
  fi
  exit "${hpc_status}"
}

# --- start-up budget (hpclaunch report, sweep's results.csv; docs/goodput.md) ----------------
# The log has no times, so this start of the job notes how long it is as it grows: a line
# {"event":"log","bytes":N} in the timeline when it changed, every 0.25 s for 10 s after the
# launch, then every 1 s to 2 min, every 5 s to 30 min, then no more. `hpclaunch report` finds the
# program's first line (and its first step or metric line) after the first mark and dates it by
# the first mark past it. Beside the launch, in the background: it delays nothing; its work is a
# stat every 0.25 s at most. Ends with the launch. First it makes the folder of the ranks'
# heartbeat files (hpc_job_start), off the job's path as well.
hpc_log_marks() {
  local log size last="" began=${SECONDS} elapsed nap
  mkdir -p -- "${HPCLAUNCH_HEARTBEAT_DIR}" 2>/dev/null || true
  log=$(readlink -f "/proc/$$/fd/1") && [[ -f "${log}" ]] || return 0
  while kill -0 "${hpc_srun_pid}" 2>/dev/null; do
    size=$(stat -L -c %s -- "${log}" 2>/dev/null) || return 0
    if [[ "${size}" != "${last}" ]]; then
      hpc_timeline_event log %bytes "${size}"
      last=${size}
    fi
    elapsed=$((SECONDS - began))
    if ((elapsed < 10)); then
      nap=0.25
    elif ((elapsed < 120)); then
      nap=1
    elif ((elapsed < 1800)); then
      nap=5
    else
      return 0
    fi
    sleep "${nap}"
  done
  # The lines written since the last look (a job shorter than one nap): one mark for them.
  size=$(stat -L -c %s -- "${log}" 2>/dev/null) || return 0
  [[ "${size}" == "${last}" ]] || hpc_timeline_event log %bytes "${size}"
}

# hpc_shell WORLD_SIZE (`hpclaunch shell`): the user's shell where the program would start. The
# script runs under
#   salloc [the #SBATCH options] srun --nodes=1 --ntasks=1 --overlap --preserve-env --pty \
#     bash -c SCRIPT
# so it runs where a batch job's script runs: on the first node, with every variable above
# exported. --preserve-env keeps the allocation's SLURM_NNODES and SLURM_NTASKS (not the step's 1
# and 1), so `srun CMD` in the shell starts one task per GPU on every node, as the batch script's
# srun does; --overlap lets such steps share this step's CPUs and GPUs. Leaving the shell (exit,
# Ctrl-D) ends the step and salloc releases the allocation.
hpc_shell() {
  export WORLD_SIZE=$1
  echo "hpclaunch: job ${SLURM_JOB_ID}: shell on $(hostname), WORLD_SIZE=${WORLD_SIZE}; exit or Ctrl-D ends the allocation" >&2
  exec "${SHELL:-/bin/bash}" -i
}

# --- run record (hpclaunch diff, hpclaunch rerun; docs/records.md) -------------------------------
# hpc_record_start hpctrain|program PROGRAM [IMAGE]: what this start of the job saw, one file per
# start: <run dir>/record/restart-N.json (N = SLURM_RESTART_COUNT, 0 for the first). Written
# beside the program, in the background: the probes (`srun --version`, `module list`,
# `nvidia-smi`, the program's or Python's versions) can take seconds, `import torch` on a shared
# file system tens of them. Each is optional and time-limited, nothing here can fail or delay the
# job, and the record is written first without them, then again with them (hpc_job_end waits up to
# 20 s for it at the end of a short job).
hpc_record_start() {
  [[ -n "${HPCLAUNCH_RUN_DIR_PREFIX:-}" ]] || return 0
  { hpc_record_write "$@" || echo "hpclaunch: could not write the run record under ${HPCLAUNCH_RUN_DIR_PREFIX}${hpc_run_id}/record (the job goes on)" >&2; } </dev/null &
  hpc_record_pid=$!
}

# A command's output (at most 4000 bytes, 60 s); nothing when it is missing or fails.
hpc_probe() {
  local out
  command -v "$1" >/dev/null 2>&1 || return 0
  if out="$(timeout 60 "$@" 2>/dev/null </dev/null)"; then
    printf '%s' "${out:0:4000}"
  fi
}

# In the background subshell of hpc_record_start.
hpc_record_write() {
  local kind=$1 program=$2 image=${3:-} dir restart="${SLURM_RESTART_COUNT:-0}" python image_sum
  local started=""
  local -a versions=()
  hpc_json_string started "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  [[ "${restart}" =~ ^[0-9]+$ ]] || restart=0
  dir="${HPCLAUNCH_RUN_DIR_PREFIX}${hpc_run_id}/record"
  mkdir -p -- "${dir}" || return 1
  hpc_add_version() {
    local key="" value=""
    if [[ -n "$2" ]]; then
      hpc_json_string key "$1"
      hpc_json_string value "$2"
      versions+=("${key}: ${value}")
    fi
  }
  hpc_record_file "${dir}/restart-${restart}.json" "${restart}" "${started}" "${versions[@]}" || return 1
  hpc_add_version slurm "$(hpc_probe srun --version)"
  if type module >/dev/null 2>&1; then
    set +u # Lmod's shell functions read unset variables
    hpc_add_version modules "$(module list 2>&1 | head -c 4000 || true)"
    set -u
  fi
  hpc_add_version nvidia_driver "$(hpc_probe nvidia-smi --query-gpu=driver_version --format=csv,noheader)"
  hpc_add_version nvidia_gpus "$(hpc_probe nvidia-smi --query-gpu=name --format=csv,noheader)"
  if [[ "${kind}" == hpctrain ]]; then
    # hpctrain --version: its git revision, LibTorch, CUDA, NCCL and Gloo as built. Only a program
    # named hpctrain* is asked: another one (a wrapper script) might start training on --version.
    if [[ "${program##*/}" == hpctrain* ]]; then
      hpc_add_version program "$(hpc_probe "${program}" --version)"
    fi
  else
    # The Python the program runs with (when it is a python command, else python3 on the PATH).
    python=${program}
    [[ "${python##*/}" == python* ]] || python=python3
    hpc_add_version python "$(hpc_probe "${python}" -c 'import sys; print(sys.version.split()[0])')"
    hpc_add_version torch "$(hpc_probe "${python}" -c '
import torch
try:
    nccl = ".".join(map(str, torch.cuda.nccl.version()))
except Exception:
    nccl = "none"
print(torch.__version__, "cuda", torch.version.cuda, "nccl", nccl)')"
  fi
  if [[ -n "${image}" ]]; then
    hpc_add_version container_image "${image}"
    if [[ -f "${image}" ]]; then
      image_sum="$(timeout 300 sha256sum -- "${image}" 2>/dev/null)" || image_sum=""
      hpc_add_version container_sha256 "${image_sum%% *}"
    fi
  fi
  hpc_record_file "${dir}/restart-${restart}.json" "${restart}" "${started}" "${versions[@]}"
}

# FILE RESTART STARTED VERSION...: the record, written to FILE.tmp and renamed onto FILE.
hpc_record_file() {
  local file=$1 restart=$2 started=$3 sep="" entry job="" nodes="" host=""
  shift 3
  hpc_json_string job "${SLURM_JOB_ID}"
  hpc_json_string nodes "${SLURM_JOB_NODELIST}"
  hpc_json_string host "$(hostname)"
  {
    printf '{\n  "restart": %s,\n' "${restart}"
    printf '  "started_at": %s,\n' "${started}"
    printf '  "job_id": %s,\n' "${job}"
    printf '  "nodelist": %s,\n' "${nodes}"
    printf '  "batch_host": %s,\n' "${host}"
    printf '  "versions": {'
    for entry in "$@"; do
      printf '%s\n    %s' "${sep}" "${entry}"
      sep=","
    done
    printf '\n  }\n}\n'
  } >"${file}.tmp" && mv -f -- "${file}.tmp" "${file}"
}

}

main "$@"
