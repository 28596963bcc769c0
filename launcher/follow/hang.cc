#include "follow/hang.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/core.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hpc {
namespace {

double seconds_between(HangWatch::Clock::time_point a, HangWatch::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Where a rank stands, in words: "step 3, phase backward, waiting inside all_reduce #12".
std::string position_text(const RankProgress& p) {
  std::string s = p.step >= 0 ? fmt::format("step {}", p.step) : "before the first step";
  if (!p.phase.empty()) s += ", phase " + p.phase;
  if (p.waiting)
    s += fmt::format(", waiting inside {} #{}", p.waiting_collective, p.waiting_seq);
  else if (p.seq > 0)
    s += fmt::format(", not in a collective (last: {} #{})", p.collective, p.seq);
  else
    s += ", no collective yet";
  return s;
}

// How far a rank got: its step, then the collectives it started.
std::tuple<long, unsigned long long> reached(const RankProgress& p) { return {p.step, p.seq}; }

std::string hosts_of(const std::vector<const RankProgress*>& group) {
  std::set<std::string> hosts;
  for (const auto* p : group) hosts.insert(p->host);
  std::string s;
  int n = 0;
  for (const auto& h : hosts) {
    if (++n > 4) return s + ", ...";
    s += (s.empty() ? "" : ", ") + h;
  }
  return s;
}

}  // namespace

std::optional<RankProgress> parse_rank_progress(const std::string& text) {
  // The file holds one line; take the last complete one should a reader see more.
  std::string line = text;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (auto nl = line.rfind('\n'); nl != std::string::npos) line.erase(0, nl + 1);
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  if (!j.contains("rank") || !j["rank"].is_number_integer()) return std::nullopt;
  RankProgress p;
  p.rank = j["rank"].get<int>();
  if (p.rank < 0) return std::nullopt;
  auto str = [&j](const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  auto num = [&j](const char* k) {
    return j.contains(k) && j[k].is_number() ? j[k].get<double>() : -1.0;
  };
  p.host = str("host");
  p.step = long(num("step"));
  p.phase = str("phase");
  p.collective = str("collective");
  p.seq = std::max(0.0, num("seq"));
  p.waiting = j.contains("waiting") && j["waiting"].is_boolean() && j["waiting"].get<bool>();
  p.waiting_collective = str("waiting_collective");
  p.waiting_seq = std::max(0.0, num("waiting_seq"));
  p.progress_time = num("progress_time");
  return p;
}

void HangWatch::reset(Clock::time_point now) {
  started_ = now;
  last_change_.reset();
  last_log_.reset();
  first_progress_.reset();  // a restart starts again: imports, rendezvous, checkpoint load
}

void HangWatch::saw_progress(int rank, const std::string& text, Clock::time_point now) {
  if (text.empty()) return;
  Seen& seen = progress_[rank];
  if (seen.text == text) return;
  seen.text = text;
  seen.progress = parse_rank_progress(text);
  seen.changed = now;
  last_change_ = now;
  if (!first_progress_) first_progress_ = now;
}

void HangWatch::saw_heartbeat(int rank, const std::string& text, Clock::time_point now) {
  if (text.empty()) return;
  auto [it, added] = heartbeat_.try_emplace(rank, text);
  if (!added && it->second == text) return;
  it->second = text;
  last_log_ = now;
  if (!first_progress_) first_progress_ = now;
}

void HangWatch::saw_log_line(int rank, const std::string& line, Clock::time_point now) {
  last_log_ = now;
  if (rank < 0) return;  // the batch script's own lines, srun's: not a rank's progress
  last_line_[rank] = {line, now};
  if (!first_progress_) first_progress_ = now;
}

std::optional<double> HangWatch::running_seconds(Clock::time_point now) const {
  if (!started_) return std::nullopt;
  return seconds_between(*started_, now);
}

HangWatch::Bound HangWatch::ran_out(Clock::time_point now, int hang_seconds,
                                    int start_seconds) const {
  if (!started_ || hang_seconds <= 0) return Bound::none;
  if (!started()) {
    const double running = running_seconds(now).value_or(0);
    return start_seconds > 0 && running >= start_seconds ? Bound::start : Bound::none;
  }
  const auto quiet = quiet_seconds(now);
  return quiet && *quiet >= hang_seconds ? Bound::progress : Bound::none;
}

std::optional<double> HangWatch::quiet_seconds(Clock::time_point now) const {
  if (!started_) return std::nullopt;
  // hpctrain's files say more than the log (rank 0 alone prints): with them, only they count.
  auto last = has_progress_files() ? last_change_ : last_log_;
  if (!last || *last < *started_) last = started_;
  return seconds_between(*last, now);
}

std::vector<std::string> HangWatch::summary(int world_size, int hang_seconds, Clock::time_point now,
                                            int nodes, int start_seconds) const {
  const double quiet = quiet_seconds(now).value_or(0);
  std::vector<std::string> lines;
  if (!started() && start_seconds > 0) {
    lines.push_back(fmt::format(
        "hang: no rank has started after {:.0f} s (job.start_seconds = {}): no rank wrote a line "
        "of its own, a progress file or a heartbeat since the job began running",
        running_seconds(now).value_or(0), start_seconds));
  } else {
    lines.push_back(fmt::format("hang: no rank reported {} for {:.0f} s (job.hang_seconds = {})",
                                has_progress_files() ? "progress"
                                : heartbeat_.empty() ? "output"
                                                     : "output or heartbeat",
                                quiet, hang_seconds));
  }
  auto more = has_progress_files()
                  ? summary_from_progress(world_size, now)
                  : summary_from_log(nodes > 0 ? nodes : world_size, nodes > 0, now);
  lines.insert(lines.end(), more.begin(), more.end());
  return lines;
}

std::vector<std::string> HangWatch::summary_from_progress(int world_size,
                                                          Clock::time_point now) const {
  std::vector<const RankProgress*> known;
  std::vector<int> silent;
  for (int r = 0; r < std::max(world_size, 1); ++r) {
    auto it = progress_.find(r);
    if (it == progress_.end() || !it->second.progress)
      silent.push_back(r);
    else
      known.push_back(&*it->second.progress);
  }
  std::vector<std::string> lines;
  if (!known.empty()) {
    // Ranks that got least far are named first: the ones the others wait for.
    auto least = reached(**std::min_element(
        known.begin(), known.end(), [](auto* a, auto* b) { return reached(*a) < reached(*b); }));
    const bool all_level =
        std::all_of(known.begin(), known.end(), [&](auto* p) { return reached(*p) == least; });
    // Groups of ranks at the same place, in the order: behind first, then by rank.
    std::map<std::tuple<bool, std::string>, std::vector<const RankProgress*>> groups;
    for (auto* p : known) groups[{reached(*p) != least, position_text(*p)}].push_back(p);
    for (const auto& [key, group] : groups) {
      std::vector<int> ranks;
      for (auto* p : group) ranks.push_back(p->rank);
      const bool behind = !std::get<0>(key) && !all_level;
      const std::string who = fmt::format("{} {} on {}", ranks.size() > 1 ? "ranks" : "rank",
                                          rank_ranges(ranks), hosts_of(group));
      std::string line =
          who + (behind ? (ranks.size() > 1 ? " are" : " is") + std::string(" behind the others: ")
                        : ": ");
      line += std::get<1>(key);
      // On follow's clock: the ranks' clocks may differ from this machine's.
      double since = 0;
      for (auto* p : group)
        since = std::max(since, seconds_between(progress_.at(p->rank).changed, now));
      line += fmt::format(" (no change for {:.0f} s)", since);
      lines.push_back(line);
    }
    if (all_level && known.front()->waiting)
      lines.push_back(
          "every rank that reports waits inside the same collective: no rank is missing from "
          "it, so the collective itself does not finish (network, NCCL: docs/troubleshooting.md)");
    else if (all_level)
      lines.push_back(
          "every rank that reports stopped at the same place outside a collective (I/O, data "
          "loading, a checkpoint on a slow file system?)");
  }
  if (!silent.empty())
    lines.push_back(fmt::format("{} {}: no progress file (not started, or died before its first)",
                                silent.size() > 1 ? "ranks" : "rank", rank_ranges(silent)));
  return lines;
}

std::vector<std::string> HangWatch::summary_from_log(int labels, bool nodes,
                                                     Clock::time_point now) const {
  std::vector<std::string> lines;
  const char* one = nodes ? "node" : "rank";
  lines.push_back(fmt::format(
      "this program writes no progress files (hpctrain does), so hpclaunch knows only each {}'s "
      "last line in the log{}:",
      one, nodes ? " (launch torchrun: srun labels a node's lines, not its ranks')" : ""));
  std::vector<int> quiet;
  int shown = 0;
  for (int r = 0; r < std::max(labels, 1); ++r) {
    auto it = last_line_.find(r);
    if (it == last_line_.end()) {
      quiet.push_back(r);
      continue;
    }
    if (++shown > 16) continue;
    std::string text = it->second.first.substr(0, 160);
    lines.push_back(fmt::format("{} {}, {:.0f} s ago: {}", one, r,
                                seconds_between(it->second.second, now), text));
  }
  if (shown > 16) lines.push_back(fmt::format("({} more {}s: see the log)", shown - 16, one));
  if (!quiet.empty())
    lines.push_back(fmt::format("{}{} {}: no line in the log", one, quiet.size() > 1 ? "s" : "",
                                rank_ranges(quiet)));
  return lines;
}

std::string rank_ranges(const std::vector<int>& ranks_in) {
  std::vector<int> ranks = ranks_in;
  std::sort(ranks.begin(), ranks.end());
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string hang_file_name(const std::string& utc_iso8601) {
  std::string compact;
  for (char c : utc_iso8601)
    if (c != '-' && c != ':') compact += c;
  return "hang-" + compact + ".txt";
}

}  // namespace hpc
