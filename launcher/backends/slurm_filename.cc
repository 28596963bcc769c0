#include "backends/slurm_filename.h"

#include <cctype>

namespace hpc {

std::string expand_slurm_filename(const std::string& pattern, const SlurmFilenameContext& context) {
  if (pattern.find('\\') != std::string::npos) {
    std::string out;
    for (char c : pattern)
      if (c != '\\') out += c;
    return out;
  }
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 >= pattern.size()) {
      out += pattern[i];
      continue;
    }
    size_t j = i + 1;
    int width = 0;
    while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j])) && j - i < 4)
      width = width * 10 + (pattern[j++] - '0');
    if (j >= pattern.size()) {
      out += pattern.substr(i);
      break;
    }
    auto padded = [&](const std::string& digits) {
      return digits.size() < static_cast<size_t>(width)
                 ? std::string(static_cast<size_t>(width) - digits.size(), '0') + digits
                 : digits;
    };
    switch (pattern[j]) {
      case '%':
        out += '%';
        break;
      case 'j':
      case 'A':
        out += padded(context.job_id);
        break;
      case 'a':
        out += padded("4294967294");
        break;  // what Slurm prints for a job without array
      case 'x':
        out += context.job_name;
        break;
      case 'u':
        out += context.user;
        break;
      case 'N':
        out += context.node;
        break;
      case 'n':
      case 't':
        out += padded("0");
        break;
      case 's':
        out += "batch";
        break;
      default:
        out += pattern.substr(i, j - i + 1);
        break;  // unknown: kept as written
    }
    i = j;
  }
  return out;
}

}  // namespace hpc
