#include "cli/complete.h"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "error.h"
#include "spec/catalog.h"
#include "spec/spec.h"

namespace hpc {
namespace {

bool visible(const CLI::Option* o) { return !o->get_group().empty(); }
bool visible(const CLI::App* a) { return !a->get_group().empty(); }

// The option of `app` named by `word` ("--preset", "-p", "--preset=2n2g"), or null.
const CLI::Option* find_option(const CLI::App* app, const std::string& word) {
  std::string name = word.substr(0, word.find('='));
  for (const CLI::Option* o : app->get_options()) {
    if (!o->nonpositional()) continue;
    for (const auto& l : o->get_lnames()) {
      if (name == "--" + l) return o;
    }
    for (const auto& s : o->get_snames()) {
      if (name == "-" + s) return o;
    }
  }
  return nullptr;
}

const CLI::App* find_subcommand(const CLI::App* app, const std::string& word) {
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    if (visible(sub) && sub->get_name() == word) return sub;
  }
  return nullptr;
}

bool takes_value(const CLI::Option* o) { return o->get_items_expected_max() > 0; }

// A value that is a comma list (sweep's --presets and --strategy): each item completes.
bool comma_list(const CLI::Option* o) {
  for (const auto& l : o->get_lnames()) {
    if (l == "presets" || l == "strategies") return true;
  }
  return false;
}

std::vector<std::string> names_from(const std::function<std::vector<std::string>()>& source) {
  return source ? source() : std::vector<std::string>{};
}

std::vector<std::string> values_of(const CLI::Option* o, const CompletionSources& sources) {
  for (const auto& l : o->get_lnames()) {
    if (l == "preset" || l == "presets") return names_from(sources.presets);
    if (l == "cluster") return names_from(sources.clusters);
    if (l == "strategy" || l == "strategies") return known_strategies();
    if (l == "launch") return known_launch_modes();
    if (l == "backend") return {"slurm", "ssh", "local"};
    if (l == "scaling") return {"strong", "weak"};
  }
  return {};
}

// `presets show NAME`, `clusters show NAME`, `clusters diff A B`.
std::vector<std::string> positional_values(const CLI::App* app, const CompletionSources& s) {
  const CLI::App* parent = app->get_parent();
  if (parent == nullptr || (app->get_name() != "show" && app->get_name() != "diff")) return {};
  if (parent->get_name() == "presets") return names_from(s.presets);
  if (parent->get_name() == "clusters") return names_from(s.clusters);
  return {};
}

std::vector<std::string> flag_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app->get_options()) {
    if (!visible(o) || !o->nonpositional()) continue;
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::vector<std::string> starting_with(std::vector<std::string> all, const std::string& prefix) {
  std::vector<std::string> kept;
  for (auto& a : all) {
    if (a.compare(0, prefix.size(), prefix) == 0) kept.push_back(std::move(a));
  }
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  return kept;
}

}  // namespace

std::vector<std::string> complete_words(const CLI::App& app, const std::vector<std::string>& words,
                                        size_t cword, const CompletionSources& sources) {
  const std::string current = cword < words.size() ? words[cword] : "";
  const CLI::App* node = &app;
  const CLI::Option* wants_value = nullptr;  // the flag the word at cword is the value of
  for (size_t i = 1; i < cword && i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") return {};  // hpctrain's or the user's program's arguments
    if (w == "=") continue;    // bash splits --preset=2n2g at '='
    wants_value = nullptr;
    if (w.size() > 1 && w[0] == '-') {
      const CLI::Option* o = find_option(node, w);
      if (o && takes_value(o) && w.find('=') == std::string::npos) {
        if (i + 1 < cword && words[i + 1] == "=") ++i;  // "--preset" "=" VALUE
        if (i + 1 == cword) wants_value = o;
        ++i;
      }
    } else if (const CLI::App* sub = find_subcommand(node, w)) {
      node = sub;
    }
  }
  // "--preset=2n" in one word (zsh keeps it whole): complete the value after '='.
  std::string prefix = current, lead;
  if (!wants_value && current.size() > 2 && current[0] == '-' &&
      current.find('=') != std::string::npos) {
    wants_value = find_option(node, current);
    lead = current.substr(0, current.find('=') + 1);
    prefix = current.substr(lead.size());
  }
  if (wants_value) {
    if (comma_list(wants_value) && prefix.find(',') != std::string::npos) {
      lead += prefix.substr(0, prefix.rfind(',') + 1);
      prefix = prefix.substr(prefix.rfind(',') + 1);
    }
    std::vector<std::string> out;
    for (auto& v : starting_with(values_of(wants_value, sources), prefix)) out.push_back(lead + v);
    return out;
  }
  if (!current.empty() && current[0] == '-') return starting_with(flag_names(node), current);
  std::vector<std::string> words_here = positional_values(node, sources);
  for (const CLI::App* sub : node->get_subcommands([](const CLI::App*) { return true; })) {
    if (visible(sub)) words_here.push_back(sub->get_name());
  }
  return starting_with(words_here, current);
}

CompletionSources catalog_completion_sources() {
  auto names = [](PresetKind kind) {
    return [kind]() -> std::vector<std::string> {
      try {
        return Catalog::from_environment().names(kind);
      } catch (const UserError&) {
        return {};
      }
    };
  };
  return {names(PresetKind::Shape), names(PresetKind::Cluster)};
}

}  // namespace hpc
