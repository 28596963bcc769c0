// hostlist expand/compress and doctor: tools around the pipeline.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/verbs.h"
#include "error.h"
#include "hostlist.h"
#include "spec/doctor.h"

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

VerbHandler define_doctor(CLI::App* verb) {
  struct Flags {
    std::string cluster;
    bool as_json = false;
  };
  auto f = std::make_shared<Flags>();
  verb->add_option("--cluster,-c", f->cluster,
                   "cluster profile whose ib_suffix and gpu_request to check");
  verb->add_flag("--json", f->as_json, "one JSON document");
  return [f](const Invocation&) { return run_doctor(f->cluster, f->as_json); };
}

}  // namespace hpc
