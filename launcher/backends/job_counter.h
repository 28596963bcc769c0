// The local backend's job ids: one counter file per runs root (<runs_root>/.local-jobs), read and
// bumped under flock so that concurrent submissions never share an id.
#pragma once

#include <string>

namespace hpc {

// The next job id under runs_root. Throws BackendError when the counter cannot be updated.
std::string allocate_local_job_id(const std::string& runs_root);

}  // namespace hpc
