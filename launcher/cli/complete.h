// Shell completion, answered by hpclaunch itself (`hpclaunch __complete CWORD WORD...`), so the
// bash and zsh scripts (packaging/completion/) stay in step with the verbs, flags and catalog:
// verbs and their subcommands, the flags of the verb being typed, and the values of --preset,
// --cluster, --strategy, --launch, --backend and --scaling (presets and clusters from the
// catalog, as `presets list` finds them: HPCLAUNCH_PATH, the user's folder, the built-in one).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace hpc {

// The names a flag's value or a positional may take; empty: nothing to offer (a file, a number).
struct CompletionSources {
  std::function<std::vector<std::string>()> presets, clusters;
};

// words: the command line as the shell split it, words[0] the program; cword: the index of the
// word being completed (words.size() when it is a new, empty word). Returns the candidates that
// start with that word, sorted; none means "let the shell complete file names".
std::vector<std::string> complete_words(const CLI::App& app, const std::vector<std::string>& words,
                                        size_t cword, const CompletionSources& sources);

// The sources from the catalog of this environment; a catalog that cannot be read gives none.
CompletionSources catalog_completion_sources();

}  // namespace hpc
