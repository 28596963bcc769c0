#!/usr/bin/env bash
# by_hand_test.sh HPCLAUNCH HPCTRAIN: a rendered script submitted by hand (`sbatch job.sbatch`)
# from inside another allocation, an salloc shell or a notebook that is a Slurm job: sbatch
# copies that allocation's SLURM_MEM_PER_CPU and SLURM_TRES_PER_TASK into the job, where srun
# read them as its own options and stopped ("SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and
# SLURM_MEM_PER_NODE are mutually exclusive", Slurm 22.05; issue 28). The script drops the
# memory variables of what it did not ask for: both tasks run, each sees its own --mem-per-gpu
# and none of the other allocation's variables.
set -euo pipefail
hpclaunch=$1
: "${SLURM_CONF:?run me through ctest (the slurm_cluster fixture sets SLURM_CONF)}"
# shellcheck source-path=SCRIPTDIR source=job_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
case_name=slurm
begin_job_test by-hand
fail() { fail_showing 20 "$*" "$work"/*.out; }
cat >probe.sh <<'PROBE'
#!/bin/bash
echo "probe rank=$SLURM_PROCID memcpu=${SLURM_MEM_PER_CPU:-unset} memgpu=${SLURM_MEM_PER_GPU:-unset} tres=${SLURM_TRES_PER_TASK:-unset}"
PROBE
chmod +x probe.sh
"$hpclaunch" render --no-project --preset 1n2g --launch srun \
  --set shape.mem_per_gpu=100M --set shape.cpus_per_gpu=1 --set job.name="$name" \
  --set job.output="$work/%x-%j.out" -o job.sbatch -- "$work/probe.sh" ||
  fail "render exited $?"
# As inside `salloc --mem-per-cpu=100 --cpus-per-task=3`.
job=$(SLURM_JOB_ID=999999 SLURM_MEM_PER_CPU=100 SLURM_TRES_PER_TASK=cpu:3 sbatch --parsable job.sbatch) ||
  fail "sbatch refused the script"
state=$(wait_state "$job" 60 COMPLETED FAILED CANCELLED TIMEOUT) || true
out=$(cat "$work/$name-$job.out")
[[ $state == COMPLETED ]] || fail "job $job ended $state"
grep -q "mutually exclusive" <<<"$out" && fail "srun read the other allocation's memory variable"
for r in 0 1; do
  grep -Eq "probe rank=$r memcpu=unset memgpu=100 tres=unset$" <<<"$out" ||
    fail "task $r did not see only its own memory request"
done
echo "ok: job $job COMPLETED; both tasks saw SLURM_MEM_PER_GPU=100 and neither of the other allocation's variables"
