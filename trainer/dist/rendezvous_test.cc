#include "dist/rendezvous.h"

#include <map>

#include <catch2/catch.hpp>

#include "error.h"

using namespace hpc::train::dist;

namespace {
EnvLookup fake(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
}  // namespace

TEST_CASE("no variables: a world of one, unless a strategy needs more", "[rendezvous]") {
  auto r = rendezvous_from_env(fake({}), "", false);
  CHECK(r.world == 1);
  CHECK(r.rank == 0);
  CHECK(r.source == "single");
  CHECK_THROWS_WITH(rendezvous_from_env(fake({}), "", true),
                    Catch::Contains("RANK/WORLD_SIZE") && Catch::Contains("SLURM_PROCID"));
}

TEST_CASE("torchrun variables", "[rendezvous]") {
  auto r = rendezvous_from_env(fake({{"RANK", "3"},
                                     {"WORLD_SIZE", "4"},
                                     {"LOCAL_RANK", "1"},
                                     {"MASTER_ADDR", "node07"},
                                     {"MASTER_PORT", "29500"},
                                     {"SLURM_PROCID", "0"}}),
                               "", true);
  CHECK(r.source == "torchrun");
  CHECK(r.rank == 3);
  CHECK(r.world == 4);
  CHECK(r.local_rank == 1);
  CHECK(r.master_addr == "node07");
  CHECK(r.master_port == 29500);
}

TEST_CASE("Slurm variables, MASTER_ADDR from the node list plus a suffix", "[rendezvous]") {
  auto r = rendezvous_from_env(fake({{"SLURM_PROCID", "5"},
                                     {"SLURM_NTASKS", "8"},
                                     {"SLURM_LOCALID", "1"},
                                     {"SLURM_JOB_NODELIST", "jwb[0012-0013,0020]"},
                                     {"SLURM_JOB_ID", "1234567"}}),
                               "i", true);
  CHECK(r.source == "slurm");
  CHECK(r.rank == 5);
  CHECK(r.world == 8);
  CHECK(r.master_addr == "jwb0012i");
  CHECK(r.master_port == 20000 + 1234567 % 12768);  // hpclaunch's rule
}

TEST_CASE("broken rendezvous variables are user errors naming the variable", "[rendezvous]") {
  CHECK_THROWS_WITH(rendezvous_from_env(fake({{"RANK", "0"}}), "", true),
                    Catch::Contains("WORLD_SIZE"));
  CHECK_THROWS_WITH(rendezvous_from_env(fake({{"RANK", "4"}, {"WORLD_SIZE", "4"}}), "", true),
                    Catch::Contains("RANK") && Catch::Contains("[0, 3]"));
  CHECK_THROWS_WITH(rendezvous_from_env(fake({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), "", true),
                    Catch::Contains("'x'"));
  CHECK_THROWS_WITH(rendezvous_from_env(fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), "", true),
                    Catch::Contains("MASTER_ADDR"));
  CHECK_THROWS_WITH(rendezvous_from_env(
                        fake({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}), "", true),
                    Catch::Contains("MASTER_PORT"));
  CHECK_THROWS_WITH(rendezvous_from_env(fake({{"SLURM_PROCID", "0"},
                                              {"SLURM_NTASKS", "2"},
                                              {"SLURM_JOB_NODELIST", "n[3-1]"},
                                              {"MASTER_PORT", "1"}}),
                                        "", true),
                    Catch::Contains("SLURM_JOB_NODELIST"));
}

TEST_CASE("loopback addresses: every rank that dials one runs on this host", "[rendezvous]") {
  for (const char* a : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    INFO(a);
    CHECK(is_loopback(a));
  }
  for (const char* a : {"10.0.0.1", "128.0.0.1", "node01", "node01i", "::2", "", "127.0.0"}) {
    INFO(a);
    CHECK_FALSE(is_loopback(a));
  }
}

TEST_CASE("LOCAL_RANK falls back to SLURM_LOCALID", "[rendezvous]") {
  // A script that exports RANK and WORLD_SIZE from Slurm's variables but no LOCAL_RANK.
  auto r = rendezvous_from_env(fake({{"RANK", "5"},
                                     {"WORLD_SIZE", "8"},
                                     {"SLURM_LOCALID", "1"},
                                     {"MASTER_ADDR", "n1"},
                                     {"MASTER_PORT", "29500"}}),
                               "", true);
  CHECK(r.source == "torchrun");
  CHECK(r.local_rank == 1);
  // LOCAL_RANK, when set, wins.
  r = rendezvous_from_env(fake({{"RANK", "5"},
                                {"WORLD_SIZE", "8"},
                                {"LOCAL_RANK", "3"},
                                {"SLURM_LOCALID", "1"},
                                {"MASTER_ADDR", "n1"},
                                {"MASTER_PORT", "29500"}}),
                          "", true);
  CHECK(r.local_rank == 3);
  CHECK_THROWS_WITH(rendezvous_from_env(fake({{"RANK", "0"},
                                              {"WORLD_SIZE", "2"},
                                              {"SLURM_LOCALID", "x"},
                                              {"MASTER_ADDR", "n1"},
                                              {"MASTER_PORT", "29500"}}),
                                        "", true),
                    Catch::Contains("SLURM_LOCALID"));
}
