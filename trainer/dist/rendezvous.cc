#include "dist/rendezvous.h"

#include <arpa/inet.h>

#include <cstdlib>

#include <fmt/format.h>

#include "dist/default_port_range.h"
#include "error.h"
#include "hostlist.h"

namespace hpc::train::dist {

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

namespace {

int parse_int(const std::string& name, const std::string& value, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(value.c_str(), &end, 10);
  if (errno != 0 || end == value.c_str() || *end != '\0' || v < lo || v > hi) {
    throw UserError(name, fmt::format("'{}' is not an integer in [{}, {}]", value, lo, hi),
                    "check how the job was launched");
  }
  return int(v);
}

}  // namespace

Rendezvous rendezvous_from_env(const EnvLookup& env, const std::string& master_suffix,
                               bool required) {
  Rendezvous r;
  const char *rank_var = nullptr, *world_var = nullptr, *local_var = nullptr;
  if (env("RANK") || env("WORLD_SIZE")) {
    r.source = "torchrun";
    rank_var = "RANK", world_var = "WORLD_SIZE", local_var = "LOCAL_RANK";
  } else if (env("SLURM_PROCID") || env("SLURM_NTASKS")) {
    r.source = "slurm";
    rank_var = "SLURM_PROCID", world_var = "SLURM_NTASKS", local_var = "SLURM_LOCALID";
  } else if (required) {
    throw UserError("--strategy",
                    "no rendezvous variables: neither RANK/WORLD_SIZE (torchrun) nor "
                    "SLURM_PROCID/SLURM_NTASKS (srun) are set",
                    "launch hpctrain with srun or torchrun, or drop --strategy");
  } else {
    return r;
  }
  for (const char* v : {rank_var, world_var}) {
    if (!env(v)) {
      throw UserError(v, "is not set",
                      fmt::format("{} and {} must be set together", rank_var, world_var));
    }
  }
  r.world = parse_int(world_var, *env(world_var), 1, 1 << 20);
  r.rank = parse_int(rank_var, *env(rank_var), 0, r.world - 1);
  // The GPU of this rank: LOCAL_RANK (torchrun), else SLURM_LOCALID (srun sets it also when a
  // script exports RANK/WORLD_SIZE itself from SLURM_PROCID/SLURM_NTASKS), else 0.
  if (!env(local_var) && env("SLURM_LOCALID")) local_var = "SLURM_LOCALID";
  r.local_rank = env(local_var) ? parse_int(local_var, *env(local_var), 0, 1 << 20) : 0;
  if (r.world == 1 && !required) return r;

  if (auto addr = env("MASTER_ADDR")) {
    r.master_addr = *addr;
  } else if (auto nodes = env("SLURM_JOB_NODELIST")) {
    std::vector<std::string> hosts;
    try {
      hosts = HostList::expand(*nodes);
    } catch (const UserError& e) {
      throw UserError("SLURM_JOB_NODELIST", e.what(), "set MASTER_ADDR instead");
    }
    if (hosts.empty()) throw UserError("SLURM_JOB_NODELIST", "is empty", "set MASTER_ADDR");
    r.master_addr = hosts.front() + master_suffix;
  } else {
    throw UserError("MASTER_ADDR",
                    "is not set and there is no SLURM_JOB_NODELIST to derive it from",
                    "export MASTER_ADDR=<first host> (torchrun sets it)");
  }
  if (auto port = env("MASTER_PORT")) {
    r.master_port = parse_int("MASTER_PORT", *port, 1, 65535);
  } else if (auto job = env("SLURM_JOB_ID")) {
    // hpclaunch's default rule (docs/rendezvous.md) over the built-in profile's port_range
    // (presets/defaults.json, read at build time): min + job id mod (max - min + 1), below
    // Linux's ephemeral ports, the same on every rank of the job.
    const std::string& id = *job;
    const std::string tail = id.size() > 9 ? id.substr(id.size() - 9) : id;
    const int span = kDefaultPortRangeMax - kDefaultPortRangeMin + 1;
    r.master_port = kDefaultPortRangeMin + parse_int("SLURM_JOB_ID", tail, 0, 999999999) % span;
  } else {
    throw UserError("MASTER_PORT", "is not set", "export MASTER_PORT=<free port> on every rank");
  }
  return r;
}

bool is_loopback(const std::string& addr) {
  if (addr == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, addr.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace hpc::train::dist
