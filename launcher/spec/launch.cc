#include "spec/launch.h"

#include <algorithm>
#include <cctype>

#include "error.h"
#include "shell.h"
#include "spec/spec.h"
#include "spec/suggest.h"

using nlohmann::json;

namespace hpc {
namespace {

bool from_defaults(const std::map<std::string, std::string>& sources, const std::string& path,
                   const std::set<std::string>& default_origins) {
  auto it = sources.find(path);
  return it == sources.end() || default_origins.count(it->second) > 0;
}

void erase_key(json& doc, std::map<std::string, std::string>& sources, const std::string& parent,
               const std::string& key) {
  if (doc.contains(parent) && doc[parent].is_object()) doc[parent].erase(key);
  sources.erase(parent + "." + key);
}

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Interpreters whose first plain argument is the script that names the job.
bool is_interpreter(const std::string& name) {
  static const std::set<std::string> others = {"bash", "sh",   "zsh",  "julia", "Rscript",
                                               "perl", "ruby", "node", "lua"};
  // python, python3, python3.11: "python" and digits or dots (a program's name may be long).
  const bool python = name.rfind("python", 0) == 0 &&
                      name.find_first_not_of("0123456789.", 6) == std::string::npos;
  return python || others.count(name) > 0;
}

}  // namespace

std::string job_name_from_program(const std::string& program,
                                  const std::vector<std::string>& args) {
  std::string name = base_name(program);
  if (is_interpreter(name) && !args.empty()) {
    if (args[0] == "-m" && args.size() > 1) {
      name = args[1];
    } else if (!args[0].empty() && args[0][0] != '-') {
      name = base_name(args[0]);
      auto dot = name.rfind('.');
      if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
    }
  }
  // It names the log file and the run directory (%x): keep it to a file name's safe letters.
  std::string safe;
  for (unsigned char c : name) {
    if (safe.size() >= 64) break;
    safe += std::isalnum(c) || c == '.' || c == '_' || c == '-' ? static_cast<char>(c) : '_';
  }
  if (safe.empty() || safe[0] == '.' || safe[0] == '-') safe = "hpclaunch";
  return safe;
}

std::string check_launch_mode(const std::string& mode, const std::string& where) {
  if (mode.empty()) return "hpctrain";
  const auto& modes = known_launch_modes();
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    throw UserError(where, "unknown launch mode \"" + comment_text(mode) + "\"",
                    suggest_fix(mode, modes, "modes (docs/programs.md)"));
  }
  return mode;
}

void refuse_strategy_for_program(const std::string& launch, const std::string& origin,
                                 const std::set<std::string>& default_origins,
                                 const WhereFn& where) {
  if (launch == "hpctrain" || origin.empty() || default_origins.count(origin) > 0) return;
  throw UserError(where("strategy"), "a strategy is hpctrain's, and launch is " + launch,
                  "leave --strategy out (your program chooses its parallelism; --set "
                  "strategy=null removes one from a file), or use --launch hpctrain");
}

void apply_program_words(json& doc, std::map<std::string, std::string>& sources,
                         const std::string& launch, const std::set<std::string>& default_origins,
                         const std::optional<std::vector<std::string>>& words,
                         const WhereFn& where) {
  if (launch == "hpctrain") {
    // Arguments after `--` come last: appended to trainer.args from every layer, --set included.
    if (words && !words->empty()) {
      json& args = doc["trainer"]["args"];
      if (!args.is_array()) args = json::array();
      for (const auto& a : *words) args.push_back(a);
      sources["trainer.args"] = "command line";
    }
    return;
  }
  if (from_defaults(sources, "strategy", default_origins)) {
    doc.erase("strategy");
    sources.erase("strategy");
  }
  if (doc.contains("trainer") && doc["trainer"].is_object() && doc["trainer"].contains("command")) {
    throw UserError(where("trainer.command"), "is hpctrain's verb, and launch is " + launch,
                    "remove it (--set trainer.command=null); put your whole command after --");
  }
  if (from_defaults(sources, "trainer.program", default_origins))
    erase_key(doc, sources, "trainer", "program");
  if (from_defaults(sources, "trainer.args", default_origins))
    erase_key(doc, sources, "trainer", "args");
  if (words && !words->empty()) {
    json& trainer = doc["trainer"];
    if (!trainer.is_object()) trainer = json::object();
    auto word = words->begin();
    if (!trainer.contains("program")) {
      trainer["program"] = *word++;
      sources["trainer.program"] = "command line";
    }
    json& args = trainer["args"];
    if (!args.is_array()) args = json::array();
    for (; word != words->end(); ++word) args.push_back(*word);
    sources["trainer.args"] = "command line";
  }
  const json* program =
      doc.contains("trainer") && doc["trainer"].is_object() && doc["trainer"].contains("program")
          ? &doc["trainer"]["program"]
          : nullptr;
  if (!program || (program->is_string() && program->get<std::string>().empty())) {
    throw UserError(where("launch"), "launch " + launch + " has no program to run",
                    "put the command after --, e.g. hpclaunch run --launch " + launch +
                        " -- python train.py --lr 3e-4");
  }
  // srun and torchrun would read a word starting with '-' in the program's place as an option.
  if (program->is_string() && program->get<std::string>()[0] == '-') {
    throw UserError(where("trainer.program"),
                    "\"" + comment_text(program->get<std::string>()) +
                        "\" starts with '-': srun or torchrun would read it as an option",
                    "put the program first, e.g. -- python train.py, or write ./" +
                        comment_text(program->get<std::string>()) + " for a file of that name");
  }
}

std::vector<std::string> read_torchrun_command(json& doc,
                                               std::map<std::string, std::string>& sources,
                                               const WhereFn& where) {
  const bool given = doc.contains("torchrun") && doc["torchrun"].is_object() &&
                     doc["torchrun"].contains("command");
  if (!given) {
    doc["torchrun"]["command"] = json::array({"torchrun"});
    sources["torchrun.command"] = "built-in defaults";
    return {"torchrun"};
  }
  auto command = doc["torchrun"]["command"].get<std::vector<std::string>>();
  if (command.empty()) {
    throw UserError(where("torchrun.command"), "is empty",
                    "name the launcher, e.g. [\"torchrun\"] or [\"python\", \"-m\", "
                    "\"torch.distributed.run\"]");
  }
  if (command[0][0] == '-') {
    throw UserError(
        where("torchrun.command"),
        "starts with \"" + comment_text(command[0]) + "\", which srun reads as an option",
        "name the launcher first, e.g. [\"torchrun\", \"--max_restarts=0\"]");
  }
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i].empty()) {
      throw UserError(where("torchrun.command"), "entry " + std::to_string(i + 1) + " is empty",
                      "remove it");
    }
  }
  return command;
}

void set_job_name_from_program(json& doc, std::map<std::string, std::string>& sources) {
  if (doc.contains("job") && doc["job"].is_object() && doc["job"].contains("name")) return;
  std::string program = "hpctrain";
  std::vector<std::string> args;
  if (doc.contains("trainer") && doc["trainer"].is_object()) {
    const json& t = doc["trainer"];
    if (t.contains("program") && t["program"].is_string()) program = t["program"];
    if (t.contains("args") && t["args"].is_array())
      args = t["args"].get<std::vector<std::string>>();
  }
  doc["job"]["name"] = job_name_from_program(program, args);
  sources["job.name"] = "the program's name";
}

}  // namespace hpc
