// Slow nodes that a job's node check (job.preflight, docs/node-check.md) named, remembered per
// cluster in the user's folder ($XDG_CONFIG_HOME/hpclaunch/excluded-nodes.json, default
// ~/.config/hpclaunch/...), each with the date it was seen, the job and the figures. Follow
// records them from the job log's line; run and submit add the ones younger than
// kExcludedNodeDays to sbatch's --exclude; `hpclaunch clusters show` lists them and
// `hpclaunch clusters forget-nodes` drops them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace hpc {

struct Spec;

// A remembered node is excluded for this many days after the check that named it.
inline constexpr int kExcludedNodeDays = 14;

struct ExcludedNode {
  std::string node;
  std::string date;  // YYYY-MM-DD (UTC) of the check that named it
  std::string job;   // that job's id
  std::string figures;
};

// The job log's line, as the batch template writes it:
//   "hpclaunch: node check: slow node(s) node02,node05 (node02 gemm ...; node05 ...): ..."
// -> one ExcludedNode per name (date and job left empty); nothing for any other line, or for
// names that are not Slurm node names (letters, digits, '-', '_', '.').
std::optional<std::vector<ExcludedNode>> parse_node_check_line(const std::string& line);

// The user's file; nothing when there is no user folder ($XDG_CONFIG_HOME and $HOME unset).
std::optional<std::filesystem::path> excluded_nodes_file();

// The nodes remembered for `cluster` from `file` (all of them; `today` and the age rule decide
// what is still excluded: excluded_now). A missing file is none; a bad one throws UserError.
std::vector<ExcludedNode> remembered_nodes(const std::filesystem::path& file,
                                           const std::string& cluster);
// Those of `nodes` seen less than kExcludedNodeDays before `today` (YYYY-MM-DD).
std::vector<ExcludedNode> excluded_now(const std::vector<ExcludedNode>& nodes,
                                       const std::string& today);

// Adds (or refreshes: a node named again by another job gets the new date, job and figures;
// by the same job, its log read again, keeps its date) `nodes` for
// `cluster`, written whole (temporary file and rename). Entries past the age limit are dropped.
void remember_nodes(const std::filesystem::path& file, const std::string& cluster,
                    const std::vector<ExcludedNode>& nodes, const std::string& today);
// Drops every node of `cluster`; returns how many there were.
size_t forget_nodes(const std::filesystem::path& file, const std::string& cluster);

// Today's date in UTC, YYYY-MM-DD.
std::string utc_today();

// run and submit: the nodes still excluded for spec.cluster join profile.sbatch_extra's
// --exclude (one line on `note` says which, until when, and how to forget them). Returns
// whether any were added.
bool add_remembered_exclusions(Spec& spec, std::ostream& note);

}  // namespace hpc
