// hostlist expand/compress and doctor: tools around the pipeline.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/verbs.h"
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
  f->compress->add_option("HOST", f->hosts, "host names (in order)")->required();
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
    if (f->compress->parsed()) std::cout << HostList::compress(f->hosts) << "\n";
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
