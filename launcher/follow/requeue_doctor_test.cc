// doctor --requeue's pure part: reading the job's log, the links, the table.
#include "follow/requeue_doctor.h"

#include <catch2/catch.hpp>

namespace hpc {
namespace {

// A whole cycle's log as the test cluster wrote it (launch srun, one task; the job library's
// lines on stderr, the same file).
const char* const kWholeCycle = R"(hpclaunch: launch srun: bash -c ...
hpclaunch doctor: run restart=unset at=1700000010.25 counter=none
hpclaunch: USR1: asking the tasks to checkpoint (finish the step, save, write the requeue marker)
hpclaunch doctor: stop signal=USR1 at=1700000047.50 counter=181
hpclaunch doctor: marker restart=0
hpclaunch: requeue marker: restart=0 (tasks ended with status 75)
hpclaunch: requeueing job 7 (restart 1 of at most 2); it resumes from the checkpoint
hpclaunch: TERM: asking the tasks to checkpoint (finish the step, save, write the requeue marker)
hpclaunch: job 7: restart 1 of at most 2; the program resumes from its checkpoint
hpclaunch doctor: run restart=1 at=1700000050.00 counter=181
hpclaunch doctor: term sent at=1700000052.00
hpclaunch doctor: stop signal=TERM at=1700000052.10 counter=191
hpclaunch doctor: marker restart=1
hpclaunch: requeue marker: restart=1 (tasks ended with status 75)
hpclaunch: requeueing job 7 (restart 2 of at most 2); it resumes from the checkpoint
hpclaunch: job 7: restart 2 of at most 2; the program resumes from its checkpoint
hpclaunch doctor: run restart=2 at=1700000055.60 counter=191
hpclaunch doctor: done counter=191
)";

RequeueSiteFacts facts() {
  RequeueSiteFacts f;
  f.job_requeue = "1";
  f.job_requeue_flag = "1";
  f.signal_seconds = 90;
  f.time_limit_minutes = 3;
  f.job_started_at = {1700000010.0};
  f.pending_reason = {"", "BeginTime", "BeginTime"};
  f.final_state = "COMPLETED";
  f.final_restarts = 2;
  return f;
}

const RequeueLink& find(const std::vector<RequeueLink>& links, const std::string& name,
                        const std::string& stop) {
  for (const auto& l : links)
    if (l.name == name && l.stop == stop) return l;
  FAIL("no link " << name << " " << stop);
  return links.front();
}

}  // namespace

TEST_CASE("requeue doctor: a whole cycle's log, every link OK", "[requeue_doctor]") {
  ProbeLog log = parse_probe_log(kWholeCycle);
  REQUIRE(log.runs.size() == 3);
  CHECK(log.runs[0].restart_count_seen == "unset");
  CHECK_FALSE(log.runs[0].counter_found);
  CHECK(log.runs[0].stop_signal == "USR1");
  CHECK(log.runs[0].counter_at_stop == 181);
  CHECK(log.runs[0].requeue_asked);
  CHECK_FALSE(log.runs[0].signal_before_program);
  CHECK(*log.runs[1].counter_found == 181);
  CHECK(log.runs[1].term_sent_at == Approx(1700000052.0));
  CHECK(log.runs[2].done);

  auto links = requeue_links(log, facts());
  CHECK(all_links_ok(links));
  CHECK(find(links, "stop reaches the program", "USR1").found ==
        "37.5 s after the start, 142 s before the limit (asked 90 s)");
  CHECK(find(links, "stop reaches the program", "TERM").found.rfind("0.10 s after scancel", 0) ==
        0);
  CHECK(find(links, "requeue -> restart", "USR1").found ==
        "2.50 s (Reason=BeginTime: cred_expire, 120 s)");
  CHECK(find(links, "counter resumed", "TERM").found == "191 -> 191, nothing lost");
  CHECK(find(links, "job ends", "").found == "COMPLETED, Restarts=2");
  const std::string table = format_requeue_table(links);
  CHECK(table.find("FAIL") == std::string::npos);
  CHECK(table.rfind("LINK", 0) == 0);
}

TEST_CASE("requeue doctor: scontrol requeue refused names the cause and the fix",
          "[requeue_doctor]") {
  const std::string log_text = R"(hpclaunch doctor: run restart=unset at=100.0 counter=none
hpclaunch doctor: stop signal=USR1 at=140.0 counter=200
hpclaunch doctor: marker restart=0
hpclaunch: requeue marker: restart=0 (tasks ended with status 75)
hpclaunch: requeueing job 9 (restart 1 of at most 2); it resumes from the checkpoint
Requested operation is presently disabled for job 9
)"
                               "hpclaunch: scontrol requeue 9 failed (a --no-requeue job, or "
                               "JobRequeue=0 on this cluster?): the job fails; resume it from "
                               "its checkpoint with a new job (--resume auto)\n";
  ProbeLog log = parse_probe_log(log_text);
  REQUIRE(log.runs.size() == 1);
  CHECK(log.runs[0].requeue_failed);
  CHECK(log.runs[0].scontrol_error == "Requested operation is presently disabled for job 9");
  RequeueSiteFacts f = facts();
  f.final_state = "FAILED";
  f.final_restarts = 0;
  f.job_requeue = "0";
  f.job_requeue_flag = "0";
  f.sbatch_no_requeue = "1";
  auto links = requeue_links(log, f);
  CHECK_FALSE(all_links_ok(links));
  const auto& refused = find(links, "scontrol requeue", "USR1");
  CHECK(refused.status == "FAIL");
  CHECK(refused.found == "refused: Requested operation is presently disabled for job 9");
  CHECK(refused.fix.find("SBATCH_NO_REQUEUE=1 in the login environment wins over the script's "
                         "#SBATCH --requeue (and JobRequeue=0") != std::string::npos);
  CHECK(find(links, "stop reaches the program", "TERM").status == "-");
  // One FAIL line, with the fix.
  const std::string table = format_requeue_table(links);
  CHECK(table.find("\nFAIL scontrol requeue (USR1): refused: Requested operation") !=
        std::string::npos);

  // Without the variable: the site's JobRequeue=0 and a --requeue that did not hold.
  f.sbatch_no_requeue = "";
  CHECK(find(requeue_links(log, f), "scontrol requeue", "USR1")
            .fix.rfind("the job has Requeue=0: JobRequeue=0 on this cluster", 0) == 0);
}

TEST_CASE("requeue doctor: no signal, no restart count, a lost count, no stop asked",
          "[requeue_doctor]") {
  RequeueSiteFacts f = facts();
  SECTION("the time limit passed without job.signal") {
    f.final_state = "TIMEOUT";
    auto links = requeue_links(
        parse_probe_log("hpclaunch doctor: run restart=unset at=1 counter=none\n"), f);
    const auto& l = find(links, "stop reaches the program", "USR1");
    CHECK(l.status == "FAIL");
    CHECK(l.found == "no USR1 reached the program (job TIMEOUT)");
    CHECK(l.fix.find("--signal=B:USR1") != std::string::npos);
  }
  SECTION("the doctor gave up while the job ran: not reached, not failed") {
    f.final_state = "";
    f.gave_up = "gave up after 60 s (--timeout), the job was RUNNING, restarts 0";
    auto links = requeue_links(
        parse_probe_log("hpclaunch doctor: run restart=unset at=1 counter=none\n"), f);
    const auto& l = find(links, "stop reaches the program", "USR1");
    CHECK(l.status == "-");
    CHECK(l.found == "not reached: " + f.gave_up);
    CHECK_FALSE(all_links_ok(links));
  }
  SECTION("the restart does not see SLURM_RESTART_COUNT, and the count went back") {
    auto links = requeue_links(parse_probe_log(R"(
hpclaunch doctor: run restart=unset at=1 counter=none
hpclaunch doctor: stop signal=USR1 at=40 counter=50
hpclaunch doctor: marker restart=0
hpclaunch: requeueing job 3 (restart 1 of at most 2); it resumes from the checkpoint
hpclaunch doctor: run restart=unset at=170 counter=45
)"),
                               f);
    CHECK(find(links, "SLURM_RESTART_COUNT", "USR1").status == "FAIL");
    CHECK(find(links, "counter resumed", "USR1").found == "50 saved, 45 read: 5 lost");
  }
  SECTION("job.signal_seconds = 0: nothing to test, one failing link") {
    f.signal_seconds = 0;
    auto links = requeue_links(ProbeLog{}, f);
    REQUIRE(links.size() == 1);
    CHECK(links[0].status == "FAIL");
    CHECK(links[0].fix.find("job.signal_seconds") != std::string::npos);
  }
  SECTION("the signal came before the program started") {
    f.final_state = "TIMEOUT";
    auto links = requeue_links(parse_probe_log(R"(
hpclaunch: USR1: asking the tasks to checkpoint (finish the step, save, write the marker)
hpclaunch doctor: run restart=unset at=1 counter=none
)"),
                               f);
    CHECK(find(links, "stop reaches the program", "USR1").found ==
          "USR1 reached the batch shell before srun had started the program");
  }
}

TEST_CASE("requeue doctor: scontrol show config values and the time limit", "[requeue_doctor]") {
  const std::string config =
      "Configuration data as of 2026-11-27T15:20:31\n"
      "AuthInfo                = socket=/tmp/m.sock,cred_expire=30\n"
      "JobRequeue              = 0\n"
      "PreemptMode             = REQUEUE\n";
  CHECK(scontrol_config_value(config, "JobRequeue") == "0");
  CHECK(scontrol_config_value(config, "PreemptMode") == "REQUEUE");
  CHECK(scontrol_config_value(config, "Missing").empty());
  CHECK(cred_expire_of(scontrol_config_value(config, "AuthInfo")) == "30");
  CHECK(cred_expire_of("socket=/x").empty());
  CHECK(requeue_probe_minutes(90) == 3);   // USR1 30-90 s after the start
  CHECK(requeue_probe_minutes(30) == 2);   // 30-90 s
  CHECK(requeue_probe_minutes(300) == 7);  // 60-120 s
}

}  // namespace hpc
