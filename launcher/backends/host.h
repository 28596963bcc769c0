// A machine that runs Slurm's commands and holds the run directories: this one (LocalHost) or
// a login node reached over SSH (SshHost, ssh_host.h). SlurmBackend works through this
// interface, so the slurm and ssh backends share every line of Slurm logic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "subprocess.h"

namespace hpc {

class Host {
 public:
  virtual ~Host() = default;
  virtual std::string name() const = 0;  // "localhost", "user@login1:22"
  // Runs argv on the host (no shell locally; over SSH each argument is shell-quoted).
  virtual CommandResult run(const std::vector<std::string>& argv,
                            const CommandOptions& options = {}) = 0;
  // mkdir -p. Throws BackendError.
  virtual void make_dirs(const std::string& path) = 0;
  // Writes a whole file (temp + rename). Throws BackendError.
  virtual void write_file(const std::string& path, const std::string& content, int mode) = 0;
  // Reads up to max_bytes from offset; exists=false when the file is not there (yet).
  virtual LogChunk read_file(const std::string& path, uint64_t offset, size_t max_bytes) = 0;
  // Absolute form of a path on the host ("~" and relative paths resolved). Throws BackendError.
  virtual std::string absolute(const std::string& path) = 0;
};

class LocalHost : public Host {
 public:
  std::string name() const override { return "localhost"; }
  CommandResult run(const std::vector<std::string>& argv, const CommandOptions& options) override;
  void make_dirs(const std::string& path) override;
  void write_file(const std::string& path, const std::string& content, int mode) override;
  LogChunk read_file(const std::string& path, uint64_t offset, size_t max_bytes) override;
  std::string absolute(const std::string& path) override;
};

}  // namespace hpc
