#include "spec/binding.h"

#include <algorithm>
#include <cctype>

#include "error.h"
#include "shell.h"

namespace hpc {

namespace {

bool is_one_of(const std::string& value, const std::vector<std::string>& names) {
  return std::find(names.begin(), names.end(), value) != names.end();
}

// "0,8,16" or "0x3,0xc" (map_*: and mask_*: lists): digits, hex digits, 'x', '*' (srun's
// repetition "0*4") and commas, starting and ending with a digit.
bool is_id_list(const std::string& list) {
  if (list.empty() || list.size() > 1024) return false;
  if (!std::isdigit(static_cast<unsigned char>(list.front()))) return false;
  if (!std::isxdigit(static_cast<unsigned char>(list.back()))) return false;
  for (unsigned char c : list)
    if (!std::isxdigit(c) && c != 'x' && c != 'X' && c != ',' && c != '*') return false;
  return list.find(",,") == std::string::npos;
}

bool is_count(const std::string& text) {
  return !text.empty() && text.size() <= 4 &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

// "PREFIX:LIST" with one of the prefixes: the list after the colon, or false.
bool is_list_binding(const std::string& value, const std::vector<std::string>& prefixes,
                     bool (*valid)(const std::string&)) {
  auto colon = value.find(':');
  if (colon == std::string::npos) return false;
  return is_one_of(value.substr(0, colon), prefixes) && valid(value.substr(colon + 1));
}

}  // namespace

void check_cpu_bind(const std::string& value, const std::string& where) {
  if (value.empty() || is_one_of(value, known_cpu_bindings())) return;
  if (is_list_binding(value, {"map_cpu", "mask_cpu", "map_ldom", "mask_ldom"}, is_id_list)) return;
  throw UserError(where, "\"" + comment_text(value) + "\" is not a CPU binding srun accepts",
                  "use one of none, cores, sockets, threads, ldoms, rank or map_cpu:LIST / "
                  "mask_cpu:LIST (srun --cpu-bind), or remove the key for the site's default");
}

void check_gpu_bind(const std::string& value, const std::string& where) {
  if (value.empty() || is_one_of(value, known_gpu_bindings())) return;
  if (is_list_binding(value, {"map_gpu", "mask_gpu"}, is_id_list)) return;
  if (is_list_binding(value, {"single", "per_task"}, is_count)) return;
  throw UserError(where, "\"" + comment_text(value) + "\" is not a GPU binding srun accepts",
                  "use closest, none, single:N, per_task:N or map_gpu:LIST / mask_gpu:LIST "
                  "(srun --gpu-bind), or remove the key for the site's default");
}

void check_warning_signal(const std::string& value, const std::string& where) {
  if (is_one_of(value, known_warning_signals())) return;
  throw UserError(where, "\"" + comment_text(value) + "\" is not a warning signal hpclaunch sends",
                  "use USR1 (the default) or USR2 (when the program or NCCL uses USR1); "
                  "TERM always checkpoints as well");
}

}  // namespace hpc
