#include "follow/run_diff.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/core.h>

#include "follow/program_state.h"
#include "follow/throughput.h"
#include "input_file.h"
#include "json_file.h"
#include "shell.h"
#include "text.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hpc {
namespace {

constexpr const char* kNone = "-";

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void flatten_into(const json& j, const std::string& path, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) flatten_into(v, path.empty() ? k : path + "." + k, out);
    return;
  }
  out[path] = text_of(j);
}

// hpctrain --version's lines ("LibTorch 2.15.0 (...)", "CUDA: compiled in (toolkit 13.2)"): the
// first word names the line.
void add_program_lines(const std::string& text, std::map<std::string, std::string>& versions) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = trim(text.substr(start, end - start));
    start = end + 1;
    if (line.empty()) continue;
    size_t cut = line.find_first_of(": ");
    std::string word = line.substr(0, cut);
    std::string rest = cut == std::string::npos ? "" : trim(line.substr(cut + 1));
    versions["program: " + word] = rest.empty() ? line : rest;
  }
}

std::string fixed(std::optional<double> v, int digits) {
  return v ? fmt::format("{:.{}f}", *v, digits) : kNone;
}

void add(std::vector<RunDifference>& out, const char* section, const std::string& key,
         const std::string& a, const std::string& b) {
  if (a != b) out.push_back({section, key, a, b});
}

void diff_maps(std::vector<RunDifference>& out, const char* section,
               const std::map<std::string, std::string>& a,
               const std::map<std::string, std::string>& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  for (const auto& k : keys) {
    auto ia = a.find(k), ib = b.find(k);
    add(out, section, k, ia == a.end() ? kNone : ia->second, ib == b.end() ? kNone : ib->second);
  }
}

std::map<std::string, std::string> program_facts(const RunSnapshot& s) {
  std::map<std::string, std::string> facts;
  const ProgramState& p = s.record.program;
  if (!s.record.program_recorded) return facts;
  facts["git revision"] =
      p.in_git() ? (p.revision.empty() ? "(no commit)" : p.revision) : "(not a git work tree)";
  if (p.in_git())
    facts["uncommitted changes"] = p.dirty() ? "sha256 " + p.changes_sha256.substr(0, 12) : "none";
  return facts;
}

std::map<std::string, std::string> version_facts(const RunSnapshot& s) {
  std::map<std::string, std::string> facts;
  if (!s.record.hpclaunch_version.empty()) facts["hpclaunch"] = s.record.hpclaunch_version;
  if (!s.restarts.empty())
    for (const auto& [k, v] : s.restarts.front().versions) facts[k] = v;
  return facts;
}

std::map<std::string, std::string> node_facts(const RunSnapshot& s) {
  std::map<std::string, std::string> facts;
  for (const auto& r : s.restarts)
    facts[fmt::format("restart {}", r.restart)] = r.problem.empty() ? r.nodelist : r.problem;
  return facts;
}

std::map<std::string, std::string> figure_facts(const RunSnapshot& s) {
  std::map<std::string, std::string> facts;
  if (!s.has_metrics) return facts;
  const RunFigures& f = s.figures;
  facts["steps"] = f.steps ? std::to_string(*f.steps) : kNone;
  facts["final loss"] = fixed(f.final_loss, 6);
  facts["final val loss"] = fixed(f.final_val_loss, 6);
  facts["tokens/s"] = fixed(f.tokens_per_s, 0);
  facts["train seconds"] = fixed(f.train_seconds, 1);
  return facts;
}

// A value as the table shows it: one line, printable, at most 48 characters.
std::string cell(const std::string& value) {
  std::string one = comment_text(value);
  if (one.size() > 48) one = one.substr(0, 45) + "...";
  return one;
}

std::string run_label(const RunSnapshot& s) {
  return fs::path(s.record.local_dir).filename().string() + " (job " + s.record.job_id + ")";
}

}  // namespace

std::map<std::string, std::string> flatten_json(const json& doc) {
  std::map<std::string, std::string> out;
  if (!doc.is_null()) flatten_into(doc, "", out);
  return out;
}

RestartRecord parse_restart_record(const std::string& text, const std::string& where) {
  RestartRecord r;
  json j;
  try {
    j = parse_json_text(text, where);
  } catch (const std::exception& e) {
    r.problem = "unreadable: " + printable_first_line(e.what());
    return r;
  }
  if (!j.is_object() || !j.contains("restart") || !j["restart"].is_number_integer()) {
    r.problem = "unreadable: no whole-number \"restart\"";
    return r;
  }
  r.restart = j["restart"].get<int>();
  if (j.contains("started_at") && j["started_at"].is_string()) r.started_at = j["started_at"];
  if (j.contains("nodelist") && j["nodelist"].is_string()) r.nodelist = j["nodelist"];
  if (j.contains("versions") && j["versions"].is_object()) {
    for (const auto& [k, v] : j["versions"].items()) {
      if (!v.is_string() || trim(v.get<std::string>()).empty()) continue;
      if (k == "program")
        add_program_lines(v.get<std::string>(), r.versions);
      else
        r.versions[k] = trim(v.get<std::string>());
    }
  }
  return r;
}

std::vector<RestartRecord> read_restart_records(const std::string& run_dir) {
  std::vector<RestartRecord> records;
  std::error_code ec;
  const fs::path dir = fs::path(run_dir) / "record";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("restart-", 0) != 0 || name.size() < 14 ||
        name.compare(name.size() - 5, 5, ".json") != 0)
      continue;
    if (!all_digits(name.substr(8, name.size() - 13))) continue;
    std::string text;
    RestartRecord r;
    try {
      text = read_input_file(it->path(), "restart record", 1 << 20);
      r = parse_restart_record(text, it->path().string());
    } catch (const std::exception& e) {
      r.problem = "unreadable: " + printable_first_line(e.what());
    }
    if (r.restart < 0) r.restart = std::atoi(name.c_str() + 8);
    records.push_back(std::move(r));
  }
  std::sort(records.begin(), records.end(),
            [](const RestartRecord& a, const RestartRecord& b) { return a.restart < b.restart; });
  return records;
}

RunFigures figures_from_metrics(const std::string& jsonl) {
  RunFigures f;
  std::map<long, double> step_ms;
  size_t start = 0;
  while (start < jsonl.size()) {
    size_t end = jsonl.find('\n', start);
    if (end == std::string::npos) end = jsonl.size();
    const std::string line = jsonl.substr(start, end - start);
    start = end + 1;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const long step = j["step"].get<long>();
    if (j.contains("val_loss") && j["val_loss"].is_number()) f.final_val_loss = j["val_loss"];
    if (!j.contains("loss") || !j["loss"].is_number()) continue;
    f.steps = std::max(f.steps.value_or(0), step + 1);
    f.final_loss = j["loss"].get<double>();
    if (j.contains("step_ms") && j["step_ms"].is_number()) step_ms[step] = j["step_ms"];
  }
  if (!step_ms.empty()) {
    double total = 0;
    for (const auto& [step, ms] : step_ms) total += ms;
    f.train_seconds = total / 1000.0;
  }
  try {
    if (auto t = steady_state(tokens_per_s_from_metrics(jsonl))) f.tokens_per_s = t->mean;
  } catch (const std::exception&) {
    // a line that is not JSON: the figures above skipped it; no tokens/s
  }
  return f;
}

RunSnapshot load_run_snapshot(const RunRecord& record) {
  RunSnapshot s;
  s.record = record;
  const fs::path dir = record.local_dir;
  try {
    s.spec = read_json_file(dir / "spec.json");
    if (!s.spec.is_object()) {
      s.spec_problem = (dir / "spec.json").string() + ": is " +
                       (s.spec.is_array()  ? "an array"
                        : s.spec.is_null() ? "null"
                                           : "not an object") +
                       ", not a spec";
      s.spec = nlohmann::json::object();
    }
  } catch (const std::exception& e) {
    s.spec_problem = printable_first_line(e.what());
  }
  s.restarts = read_restart_records(record.local_dir);
  std::error_code ec;
  if (fs::is_regular_file(dir / "metrics.jsonl", ec)) {
    s.has_metrics = true;
    try {
      s.figures =
          figures_from_metrics(read_input_file(dir / "metrics.jsonl", "metrics", 256 << 20));
    } catch (const std::exception&) {
      s.has_metrics = false;  // not a regular file, or over 256 MiB: no figures
    }
  }
  return s;
}

std::vector<RunDifference> diff_runs(const RunSnapshot& a, const RunSnapshot& b) {
  std::vector<RunDifference> out;
  diff_maps(out, "spec", flatten_json(a.spec), flatten_json(b.spec));
  diff_maps(out, "program", program_facts(a), program_facts(b));
  diff_maps(out, "versions", version_facts(a), version_facts(b));
  diff_maps(out, "nodes", node_facts(a), node_facts(b));
  diff_maps(out, "figures", figure_facts(a), figure_facts(b));
  return out;
}

std::string format_run_differences(const std::vector<RunDifference>& diffs, const RunSnapshot& a,
                                   const RunSnapshot& b) {
  std::string out = fmt::format("A  {}\nB  {}\n", cell(run_label(a)), cell(run_label(b)));
  for (const RunSnapshot* s : {&a, &b})
    if (!s->spec_problem.empty())
      out +=
          fmt::format("note: {}: no spec to compare ({})\n", cell(run_label(*s)), s->spec_problem);
  bool same = true;
  for (const auto& d : diffs) same = same && d.section == std::string("figures");
  if (diffs.empty())
    return out + "the runs are identical: spec, program, versions, nodes, figures\n";
  if (same) out += "same spec, program, versions and nodes\n";
  std::string section;
  for (const auto& d : diffs) {
    if (d.section != section) {
      section = d.section;
      out += fmt::format("{:<30} {:<48} {}\n", section, "A", "B");
    }
    out += fmt::format("  {:<28} {:<48} {}\n", cell(d.key), cell(d.a), cell(d.b));
  }
  return out;
}

json run_differences_json(const std::vector<RunDifference>& diffs, const RunSnapshot& a,
                          const RunSnapshot& b) {
  json list = json::array();
  for (const auto& d : diffs)
    list.push_back(json{{"section", d.section}, {"key", d.key}, {"a", d.a}, {"b", d.b}});
  auto run = [](const RunSnapshot& s) {
    return json{{"run_dir", s.record.local_dir}, {"job_id", s.record.job_id}};
  };
  return json{{"a", run(a)}, {"b", run(b)}, {"identical", diffs.empty()}, {"differences", list}};
}

}  // namespace hpc
