#include "backends/sbatch_options.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>

#include "error.h"
#include "posix_io.h"
#include "shell.h"
#include "spec/sbatch_long_options.h"
#include "spec/slurm_time.h"
#include "spec/spec.h"
#include "text.h"

namespace hpc {
namespace {

// ---- #SBATCH parsing ------------------------------------------------------------------------

// sbatch's short options that take a value ("a:A:B:c:C:d:D:e:F:G:i:J:L:m:M:n:N:o:p:q:S:t:w:x:").
bool short_option_takes_value(char c) {
  return std::strchr("aABcCdDeFGiJLmMnNopqStwx", c) != nullptr;
}

}  // namespace

int SbatchOptions::tasks() const {
  if (ntasks > 0) return ntasks;
  if (ntasks_per_node > 0) return ntasks_per_node * std::max(1, nodes);
  return 1;
}

std::vector<SbatchArgument> sbatch_script_arguments(const std::string& script) {
  std::vector<SbatchArgument> out;
  size_t pos = 0;
  int lineno = 0;
  while (pos < script.size()) {
    size_t nl = script.find('\n', pos);
    std::string line = script.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? script.size() : nl + 1;
    ++lineno;
    if (line.rfind("#SBATCH", 0) != 0) {
      // A line that is neither blank nor a comment ends the directives.
      size_t first = line.find_first_not_of(" \t\r\f\v");
      if (first != std::string::npos && line[first] != '#') break;
      continue;
    }
    size_t i = 7;
    const size_t n = line.size();
    while (true) {
      while (i < n && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      if (i >= n || line[i] == '#') break;
      std::string arg;
      bool quoted = false, escaped = false, comment = false;
      char quote = 0;
      while (i < n && (quoted || !std::isspace(static_cast<unsigned char>(line[i])))) {
        char c = line[i];
        if (escaped) {
          escaped = false;
          arg += c;
        } else if (c == '\\') {
          escaped = true;
        } else if (quoted) {
          if (c == quote)
            quoted = false;
          else
            arg += c;
        } else if (c == '"' || c == '\'') {
          quoted = true;
          quote = c;
        } else if (c == '#') {
          comment = true;
          break;
        } else {
          arg += c;
        }
        ++i;
      }
      if (!(comment && arg.empty())) out.push_back({arg, lineno});
      if (comment) break;
    }
  }
  return out;
}

SbatchOptions parse_sbatch_options(const std::string& script, const std::string& origin) {
  SbatchOptions o;
  auto args = sbatch_script_arguments(script);
  auto where = [&](int line) { return origin + ":" + std::to_string(line); };
  auto number = [&](const std::string& option, const std::string& value, int line) {
    if (!all_digits(value) || value.size() > 6)
      throw UserError(where(line), "#SBATCH " + option + "=" + value + ": not a whole number",
                      "write a count, e.g. " + option + "=1");
    return std::atoi(value.c_str());
  };
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& a = args[k].text;
    int line = args[k].line;
    std::string name, value;
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      auto eq = a.find('=');
      name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      // As sbatch reads it: "--tim=5" is --time, "--tasks-per-node" --ntasks-per-node.
      const SbatchOptionMatch m = resolve_sbatch_long_option(name);
      if (m.kind == SbatchOptionMatch::Ambiguous) {
        throw UserError(where(line), "#SBATCH --" + name + " is ambiguous to sbatch",
                        "write the option's full name");
      }
      if (m.option) name = m.option->canonical;
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else if (m.option && m.option->argument == SbatchOptionValue::Required) {
        if (k + 1 >= args.size())
          throw UserError(where(line), "#SBATCH --" + name + " needs a value",
                          "write --" + name + "=VALUE");
        value = args[++k].text;
      }
    } else if (a.size() >= 2 && a[0] == '-' && a[1] != '-') {
      // Short options, possibly clustered ("-Hv"); the first one with a value ends the cluster.
      static const std::map<char, std::string> long_name = {
          {'J', "job-name"}, {'N', "nodes"},     {'n', "ntasks"}, {'c', "cpus-per-task"},
          {'t', "time"},     {'o', "output"},    {'e', "error"},  {'D', "chdir"},
          {'a', "array"},    {'d', "dependency"}};
      for (size_t c = 1; c < a.size(); ++c) {
        if (!short_option_takes_value(a[c])) continue;
        if (c + 1 < a.size())
          value = a.substr(c + 1);
        else if (k + 1 < args.size())
          value = args[++k].text;
        else
          throw UserError(where(line), "#SBATCH -" + std::string(1, a[c]) + " needs a value", "");
        auto it = long_name.find(a[c]);
        name = it == long_name.end() ? "" : it->second;
        break;
      }
    } else {
      continue;  // not an option
    }
    if (name == "job-name") {
      o.job_name = value;
    } else if (name == "nodes") {
      size_t digits = 0;
      while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits])))
        ++digits;
      o.nodes = number("--nodes", value.substr(0, digits), line);
    } else if (name == "ntasks") {
      o.ntasks = number("--ntasks", value, line);
    } else if (name == "ntasks-per-node") {
      o.ntasks_per_node = number("--ntasks-per-node", value, line);
    } else if (name == "cpus-per-task") {
      o.cpus_per_task = number("--cpus-per-task", value, line);
    } else if (name == "time") {
      o.time_limit_seconds = parse_slurm_time(value, where(line) + ": #SBATCH --time");
    } else if (name == "output") {
      o.output = value;
    } else if (name == "error") {
      o.error = value;
    } else if (name == "chdir") {
      o.chdir = value;
    } else if (name == "open-mode") {
      o.open_mode_append = value == "append" || value == "a";
    } else if (name == "array") {
      o.array = value;
    } else if (name == "dependency") {
      o.dependency = value;
    } else if (name == "requeue") {
      o.requeue = true;
      o.no_requeue = false;
    } else if (name == "no-requeue") {
      o.no_requeue = true;
      o.requeue = false;
    } else if (name == "signal") {
      // [{R|B}:]SIG[@SECONDS]
      std::string spec = value;
      bool batch = false;
      if (auto colon = spec.find(':'); colon != std::string::npos) {
        std::string flags = spec.substr(0, colon);
        if (flags.find_first_not_of("RB") != std::string::npos)
          throw UserError(where(line), "#SBATCH --signal=" + value + ": unknown flag before ':'",
                          "write --signal=B:USR1@90");
        batch = flags.find('B') != std::string::npos;
        spec = spec.substr(colon + 1);
      }
      std::string sig = spec, seconds = "60";
      if (auto at = spec.find('@'); at != std::string::npos) {
        sig = spec.substr(0, at);
        seconds = spec.substr(at + 1);
      }
      int number_of_signal = signal_from_name(sig);
      if (number_of_signal == 0)
        throw UserError(where(line),
                        "#SBATCH --signal=" + value + ": unknown signal \"" + sig + "\"",
                        "write --signal=B:USR1@90");
      o.signal_number = number_of_signal;
      o.signal_seconds = number("--signal", seconds, line);
      o.signal_batch_only = batch;
    }
  }
  return o;
}

}  // namespace hpc
