// hostlist expand/compress and doctor: tools around the pipeline.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backends/slurm_backend.h"
#include "cli/flags.h"
#include "cli/verbs.h"
#include "error.h"
#include "follow/requeue_doctor.h"
#include "hostlist.h"
#include "spec/doctor.h"
#include "subprocess.h"

using nlohmann::json;

namespace hpc {

VerbHandler define_hostlist(CLI::App* verb) {
  struct Flags {
    std::string expr;
    std::vector<std::string> hosts;
    bool as_json = false;
    CLI::App *expand = nullptr, *compress = nullptr;
  };
  auto f = std::make_shared<Flags>();
  verb->require_subcommand(1);
  f->expand = verb->add_subcommand("expand", "one host per line, like scontrol show hostnames");
  f->expand->add_option("EXPR", f->expr, "host list, e.g. 'node[01-03,7]'")->required();
  f->expand->add_flag("--json", f->as_json, "JSON array");
  f->compress = verb->add_subcommand("compress", "hosts -> compact expression");
  f->compress
      ->add_option("HOSTS", f->hosts,
                   "host names or host lists, in order: 'a,b,c', 'node[1-2]' node3 (as "
                   "scontrol show hostlist reads its argument)")
      ->required();
  return [f](const Invocation&) {
    if (f->expand->parsed()) {
      auto list = HostList::expand(f->expr);
      if (f->as_json) {
        std::cout << json(list).dump() << "\n";
      } else {
        for (const auto& h : list) std::cout << h << "\n";
      }
      return 0;
    }
    if (f->compress->parsed()) {
      // Each argument is a host list itself, as `scontrol show hostlist a,b,c` reads it.
      std::vector<std::string> hosts;
      for (const auto& list : f->hosts) {
        auto part = HostList::expand(list);
        hosts.insert(hosts.end(), part.begin(), part.end());
      }
      if (hosts.empty())
        throw UserError("hostlist compress", "no host names given", "name at least one host");
      std::cout << HostList::compress(hosts) << "\n";
    }
    return 0;
  };
}

namespace {

// doctor --requeue: what to submit (a SelectionFlags without the program's own flags) and where.
struct RequeueFlags {
  bool requeue = false;
  SelectionFlags selection;
  BackendFlags backend;
  int timeout_seconds = 900;
};

// The doctor's job, rendered as `hpclaunch run --launch srun -- bash -c PROGRAM` would render it
// (follow/requeue_doctor.h), with its own name, two requeues, no node check and a time limit
// that brings job.signal soon after the start.
Rendered render_requeue_job(SelectionFlags selection, const std::vector<std::string>& command) {
  if (selection.preset.empty()) selection.preset = "1n1g";
  selection.launch = "srun";
  const std::vector<std::string> user_sets = selection.sets;
  auto render = [&](const std::string& signal, const std::vector<std::string>& ours) {
    selection.sets = {"job.name=hpclaunch-doctor-requeue"};  // the user's --set may rename it
    selection.sets.insert(selection.sets.end(), user_sets.begin(), user_sets.end());
    selection.sets.insert(selection.sets.end(), ours.begin(), ours.end());
    return render_selection(
        selection,
        std::vector<std::string>{"bash", "-c", requeue_probe_program(), "hpclaunch-doctor", signal},
        command);
  };
  const std::vector<std::string> ours = {"job.max_requeues=2", "job.preflight.enabled=false",
                                         "job.hang_seconds=0"};
  Rendered first = render("USR1", ours);  // what the profile says about job.signal
  if (first.spec.job.signal_seconds <= 0) return first;
  std::vector<std::string> timed = ours;
  const int minutes = requeue_probe_minutes(first.spec.job.signal_seconds);
  timed.push_back("shape.time=" + std::to_string(minutes / 60) + ":" +
                  (minutes % 60 < 10 ? "0" : "") + std::to_string(minutes % 60) + ":00");
  return render(first.spec.job.signal, timed);
}

int run_requeue_check(const RequeueFlags& f, bool as_json, const Invocation& in) {
  if (f.timeout_seconds < 60 || f.timeout_seconds > 86400)
    throw UserError("--timeout", std::to_string(f.timeout_seconds) + " s is out of range",
                    "give 60 to 86400 seconds (the default, 900, fits an idle partition)");
  BackendChoice choice = f.backend.choice();
  if (choice.host.empty() && !program_on_path("sbatch")) {
    throw UserError("doctor --requeue", "no sbatch on this machine",
                    "run it on a login node of the cluster, or pass --host LOGIN to run it "
                    "there over SSH");
  }
  Rendered r = render_requeue_job(f.selection, in.command);
  auto backend = make_backend(choice);
  auto* slurm = dynamic_cast<SlurmBackend*>(backend.get());
  if (!slurm) throw UserError("doctor --requeue", "needs Slurm", "pass --host LOGIN");
  RequeueDoctorOptions o;
  o.timeout_seconds = f.timeout_seconds;
  o.as_json = as_json;
  return run_requeue_doctor(*backend, slurm->host_ref(), r.spec, r.script, choice, in.command, o,
                            std::cout, std::cerr);
}

}  // namespace

VerbHandler define_doctor(CLI::App* verb) {
  struct Flags {
    std::string cluster;
    bool as_json = false;
    RequeueFlags requeue;
  };
  auto f = std::make_shared<Flags>();
  verb->add_option("--cluster,-c", f->cluster,
                   "cluster profile whose ib_suffix and gpu_request to check (with --requeue: "
                   "whose job.signal, partition and account the job uses)");
  verb->add_flag("--json", f->as_json, "one JSON document");
  const char* const group = "Requeue (a job on the cluster; docs/doctor.md#requeue)";
  RequeueFlags& q = f->requeue;
  verb->add_flag("--requeue", q.requeue,
                 "submit a small job that is stopped as the profile says (job.signal, then "
                 "TERM as preemption sends it), checkpoints, requeues twice and resumes; a table "
                 "says which link works here")
      ->group(group);
  verb->add_option("--timeout", q.timeout_seconds,
                   "with --requeue: give up (and cancel the job) after this many seconds "
                   "(default 900)")
      ->group(group);
  verb->add_option("--preset,-p", q.selection.preset, "with --requeue: the job's shape (1n1g)")
      ->group(group);
  verb->add_option("--set", q.selection.sets, "with --requeue: override a key (repeatable)")
      ->take_all()
      ->group(group);
  verb->add_option("--project", q.selection.project, "with --requeue: project file")->group(group);
  verb->add_flag("--no-project", q.selection.no_project, "with --requeue: ignore ./hpclaunch.json")
      ->group(group);
  verb->add_option("--partition", q.selection.partition, "with --requeue: profile.partition")
      ->group(group);
  verb->add_option("--account", q.selection.account, "with --requeue: profile.account")
      ->group(group);
  verb->add_option("--qos", q.selection.qos, "with --requeue: profile.qos")->group(group);
  verb->add_option("--reservation", q.selection.reservation, "with --requeue: a reservation")
      ->group(group);
  verb->add_option("--host", q.backend.host,
                   "with --requeue: submit over SSH to this login node (host or ~/.ssh/config "
                   "alias)")
      ->group(group);
  verb->add_flag("--accept-new-host-key", q.backend.accept_new_host_key,
                 "with --requeue: trust and record an unknown SSH host key")
      ->group(group);
  verb->add_option("--ssh-config", q.backend.ssh_config, "SSH config file")->group(group);
  verb->add_option("--known-hosts", q.backend.known_hosts, "known_hosts file")->group(group);
  verb->add_option("--runs-dir", q.backend.runs_dir, "run directories (default ./runs)")
      ->group(group);
  verb->add_option("--remote-runs-dir", q.backend.remote_runs_dir,
                   "ssh: run directories on the login node (default ~/hpclaunch-runs)")
      ->group(group);
  return [f, verb](const Invocation& in) {
    if (!f->requeue.requeue) {
      for (const CLI::Option* o : verb->get_options()) {
        if (o->get_group().rfind("Requeue", 0) == 0 && o->count() > 0) {
          throw UserError(o->get_name(), "is an option of doctor --requeue",
                          "add --requeue (a job on the cluster), or leave " + o->get_name() +
                              " out for the checks of this machine");
        }
      }
      return run_doctor(f->cluster, f->as_json);
    }
    f->requeue.selection.cluster = f->cluster;
    return run_requeue_check(f->requeue, f->as_json, in);
  };
}

}  // namespace hpc
