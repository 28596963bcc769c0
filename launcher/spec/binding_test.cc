// profile.cpu_bind, profile.gpu_bind and job.signal: what srun and hpclaunch accept, and one
// clear error for the rest (the key path, the value, the fix).
#include "spec/binding.h"

#include <catch2/catch.hpp>

#include "error.h"

using hpc::UserError;

TEST_CASE("binding: srun's named and list CPU bindings are accepted", "[binding]") {
  for (const char* v : {"", "none", "cores", "sockets", "threads", "ldoms", "rank", "map_cpu:0,8",
                        "mask_cpu:0x3,0xc", "map_ldom:0,1", "map_cpu:0*4"}) {
    INFO(v);
    CHECK_NOTHROW(hpc::check_cpu_bind(v, "profile.cpu_bind"));
  }
}

TEST_CASE("binding: CPU binding garbage is one error naming the key", "[binding]") {
  for (const char* v :
       {"core", "Cores", "cores,verbose", "map_cpu:", "map_cpu:a,b", "map_cpu:0,,1", "map_gpu:0",
        "$(touch /tmp/x)", "cores;reboot", "mask_cpu:0x3 --uid=0", "cores\n"}) {
    INFO(v);
    try {
      hpc::check_cpu_bind(v, "cluster.json: profile.cpu_bind");
      FAIL("accepted");
    } catch (const UserError& e) {
      std::string m = e.what();
      CHECK(m.find("cluster.json: profile.cpu_bind") == 0);
      CHECK(m.find("srun --cpu-bind") != std::string::npos);
      CHECK(m.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("binding: GPU bindings", "[binding]") {
  for (const char* v :
       {"", "closest", "none", "single:1", "per_task:2", "map_gpu:0,1,2,3", "mask_gpu:0x1,0x2"}) {
    INFO(v);
    CHECK_NOTHROW(hpc::check_gpu_bind(v, "profile.gpu_bind"));
  }
  for (const char* v :
       {"close", "single:", "single:x", "per_task:-1", "map_gpu:0 1", "$(id)", "closest`id`"}) {
    INFO(v);
    CHECK_THROWS_AS(hpc::check_gpu_bind(v, "profile.gpu_bind"), UserError);
  }
}

TEST_CASE("binding: the warning signal is USR1 or USR2", "[binding]") {
  CHECK_NOTHROW(hpc::check_warning_signal("USR1", "job.signal"));
  CHECK_NOTHROW(hpc::check_warning_signal("USR2", "job.signal"));
  for (const char* v : {"", "usr2", "SIGUSR2", "TERM", "KILL", "USR3", "12", "USR1;id"}) {
    INFO(v);
    try {
      hpc::check_warning_signal(v, "--set job.signal");
      FAIL("accepted");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("--set job.signal") == 0);
    }
  }
}
