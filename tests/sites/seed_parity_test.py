#!/usr/bin/python3
"""The job each site's own course or guide runs, rendered by hpclaunch, has every directive and
setting of the site's script, or the cluster profile says in one line why not.

The sites' scripts are kept here as facts (paraphrased, each with its source), not copied: per
site, the job as `hpclaunch render` arguments, the facts the rendered script must show (a
regular expression each, one line of the script), and the site's settings hpclaunch does
differently on purpose, each with a phrase the profile's comments must hold (its one line of
why). A fact that goes missing, or a difference the profile stops explaining, fails the test.
Usage: seed_parity_test.py SITE HPCLAUNCH SOURCE_DIR   (SITE: jsc, daic or baskerville)
"""
import os
import re
import subprocess
import sys
import tempfile

SITE, HPCLAUNCH, SOURCE = sys.argv[1:4]

# Each job: (what the site runs and where it says so, render arguments, facts, differences).
# facts: (the site's setting, regex over the rendered script, re.M).
# differences: (the site's setting, what the profile's comments say about it).
JOBS = {
    "jsc": [(
        "JSC course: torchrun over 2 nodes x 4 GPUs (shared/seeds/002_*.txt; GitHub "
        "HelmholtzAI-FZJ/2025-12-course-..., code/parallelize/run_ddp_training.sbatch; the 2023 "
        "course's code/parallelize/run_ddp.sh)",
        ["--preset", "2n4g", "--cluster", "jsc", "--set", "profile.account=myproj",
         "--launch", "torchrun", "--", "python", "train.py"],
        [("--account", r"^#SBATCH --account=myproj$"),
         ("--partition=booster (2023 course)", r"^#SBATCH --partition=booster$"),
         ("2 nodes", r"^#SBATCH --nodes=2$"),
         ("4 GPUs per node", r"^#SBATCH --gpus-per-node=4$"),
         ("a node's 96 CPUs (4 x --cpus-per-task=24) for the one torchrun task per node",
          r"^#SBATCH --cpus-per-task=96$"),
         ("the software stage: module load Stages/2025", r"^  hpc_module load Stages/2025$"),
         ("module load GCC OpenMPI Python PyTorch",
          r"^  hpc_module load PyTorch$"),
         ("MASTER_ADDR: the first host of the node list",
          r'^  hpc_master_host="\$\{hpc_hosts\[0\]\}\$\{suffix\}"$'),
         ("... with an i appended (InfiniBand), resolved to its address (nslookup)",
          r"^  hpc_rendezvous i resolve "),
         ("(resolved: the library's getent)", r"getent ahostsv4 \"\$\{hpc_master_host\}\""),
         ("srun --cpu_bind=none", r'^    "--cpu-bind=none"'),
         ("one torchrun per node", r"^    --ntasks=2 --ntasks-per-node=1 "),
         ("torchrun --nnodes=$SLURM_NNODES", r"^  hpc_torchrun=\(torchrun --nnodes=2 "),
         ("--nproc_per_node=gpu (4 GPUs)", r"^  hpc_torchrun=\(.* --nproc_per_node=4 "),
         ("--rdzv_backend c10d", r"^  hpc_torchrun=\(.* --rdzv_backend=c10d$"),
         ("--rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT",
          r'^    --rdzv_endpoint="\$\{MASTER_ADDR\}:\$\{MASTER_PORT\}" '),
         ("--rdzv_conf=is_host=1 on node 0, 0 elsewhere",
          r"is_host=\$\(\(SLURM_NODEID == 0 \? 1 : 0\)\)")],
        [("export MASTER_PORT=7010", "MASTER_PORT from the job id"),
         ("--rdzv_id $RANDOM", "--rdzv_id the job id"),
         ("--gres=gpu:4", "--gpus-per-node=4: the same request"),
         ("export CUDA_VISIBLE_DEVICES=0,1,2,3", "--gpu-bind=none leaves every task")],
    )],
    "daic": [(
        "DAIC guide: DDP under torchrun on 1 node x 2 GPUs (shared/seeds/003_*.txt, "
        "'Slurm script for DDP')",
        ["--preset", "1n2g", "--cluster", "daic", "--set", "profile.account=mygroup",
         "--launch", "torchrun", "--", "python", "src/train_ddp.py"],
        [("--account", r"^#SBATCH --account=mygroup$"),
         ("--partition=all", r"^#SBATCH --partition=all$"),
         ("--nodes=1", r"^#SBATCH --nodes=1$"),
         ("--gres=gpu:2", r"^#SBATCH --gres=gpu:2$"),
         ("--mem=64G for 2 GPUs", r"^#SBATCH --mem-per-gpu=32G$"),
         ("4 CPUs per GPU for data loading (8 for the node's torchrun)",
          r"^#SBATCH --cpus-per-task=8$"),
         ("module purge", r"^  hpc_module purge$"),
         ("module load 2025/gpu", r"^  hpc_module load 2025/gpu$"),
         ("module load cuda/12.9", r"^  hpc_module load cuda/12.9$"),
         ("NCCL_P2P_DISABLE=1 (NCCL configuration on DAIC)", r"^  export NCCL_P2P_DISABLE=1$"),
         ("torchrun --nnodes=1", r"^  hpc_torchrun=\(torchrun --nnodes=1 "),
         ("--rdzv_backend=c10d", r"^  hpc_torchrun=\(.* --rdzv_backend=c10d$"),
         ("--rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT",
          r'^    --rdzv_endpoint="\$\{MASTER_ADDR\}:\$\{MASTER_PORT\}" ')],
        [("--ntasks-per-node=4 --cpus-per-task=4 with --nproc_per_node=4 on 2 GPUs",
          "one process per GPU"),
         ("export MASTER_ADDR=$(hostname)", "the first host of the node list"),
         ("export MASTER_PORT=29500", "MASTER_PORT from the job id"),
         ("--mem=64G", "--mem-per-gpu"),
         ("srun uv run torchrun", "your program's own launcher words")],
    ), (
        "DAIC guide: multi-node training under srun, 2 nodes x 2 GPUs (shared/seeds/003_*.txt, "
        "'Slurm script for multi-node')",
        ["--preset", "2n2g", "--cluster", "daic", "--set", "profile.account=mygroup",
         "--launch", "srun", "--", "python", "src/train.py"],
        [("--partition=all", r"^#SBATCH --partition=all$"),
         ("--nodes=2", r"^#SBATCH --nodes=2$"),
         ("--gres=gpu:2", r"^#SBATCH --gres=gpu:2$"),
         ("--mem=64G for 2 GPUs", r"^#SBATCH --mem-per-gpu=32G$"),
         ("module load 2025/gpu cuda/12.9", r"^  hpc_module load cuda/12.9$"),
         ("MASTER_ADDR: the first host of the node list",
          r'^  hpc_master_host="\$\{hpc_hosts\[0\]\}\$\{suffix\}"$'),
         ("NCCL_P2P_DISABLE=1", r"^  export NCCL_P2P_DISABLE=1$")],
        [("--ntasks-per-node=1 (Lightning spawns its processes)", "one process per GPU"),
         ("--cpus-per-task=8 for the node's one task", "each with 4 CPUs"),
         ("export MASTER_PORT=29500", "MASTER_PORT from the job id")],
    )],
    "baskerville": [(
        "ATI's Baskerville course: Lightning on 2 nodes x 4 GPUs under srun (shared/seeds/"
        "000_*.txt: `srun python train_gpt2.py` in batch-lit-2n4g.sh), with the Baskerville "
        "team's settings (GitHub baskerville-hpc/basicSlurmScripts)",
        ["--preset", "2n4g", "--cluster", "baskerville", "--set", "profile.account=myproject",
         "--set", "profile.qos=turing", "--launch", "srun", "--", "python", "train_gpt2.py"],
        [("--account", r"^#SBATCH --account=myproject$"),
         ("--qos", r"^#SBATCH --qos=turing$"),
         ("--nodes 2", r"^#SBATCH --nodes=2$"),
         ("--gpus-per-node 4", r"^#SBATCH --gpus-per-node=4$"),
         ("one task per GPU, as Lightning under srun wants", r"^#SBATCH --ntasks-per-node=4$"),
         ("--cpus-per-gpu 36", r"^#SBATCH --cpus-per-task=36$"),
         ("module purge", r"^  hpc_module purge$"),
         ("module load baskerville", r"^  hpc_module load baskerville$"),
         ("module load bask-apps/live", r"^  hpc_module load bask-apps/live$"),
         ("srun python train_gpt2.py", r"^  hpc_program=\(python train_gpt2.py\)$")],
        [("#SBATCH --cpus-per-gpu 36", "--cpus-per-task=36 with one task per GPU")],
    )],
}


def main():
    if SITE not in JOBS:
        sys.exit(f"seed_parity_test: unknown site {SITE!r} ({', '.join(JOBS)})")
    profile_file = os.path.join(SOURCE, "presets", "clusters", SITE + ".json")
    # The comments as running text: a phrase may wrap across comment lines.
    profile = re.sub(r"\s*\n\s*//\s*", " ", open(profile_file).read())
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "xdg"),
                   HPCLAUNCH_DATA_DIR=SOURCE)
        env.pop("HPCLAUNCH_PATH", None)
        for what, args, facts, differences in JOBS[SITE]:
            print(f"== {what}")
            p = subprocess.run([HPCLAUNCH, "render", "--no-project", *args], cwd=work, env=env,
                               capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                print(f"FAIL hpclaunch render {' '.join(args)}: exit {p.returncode}: {p.stderr}")
                failures += 1
                continue
            for setting, pattern in facts:
                ok = re.search(pattern, p.stdout, re.M) is not None
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {setting}" +
                      ("" if ok else f": no line matches {pattern!r}"))
            for setting, why in differences:
                ok = why in profile
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} differs on purpose: {setting}" +
                      (f" ({profile_file} says why: ...{why}...)" if ok else
                       f": {profile_file} does not say why (no {why!r} in it)"))
    if failures:
        sys.exit(f"{failures} of the site's settings missing or unexplained")
    print(f"every setting of {SITE}'s own script is in the rendered job, or explained")


main()
