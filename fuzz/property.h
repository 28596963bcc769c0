// What every fuzz target checks besides the sanitizers: the input contract (bad input is a
// UserError of one line, never another exception) and each target's own properties. A broken
// property aborts, naming itself, so that libFuzzer saves the input as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "error.h"

namespace hpc::fuzz {

[[noreturn]] inline void broken(const char* property, const std::string& detail) {
  std::fprintf(stderr, "\nproperty broken: %s\n  %s\n", property, detail.c_str());
  std::abort();
}

inline void check(bool holds, const char* property, const std::string& detail = "") {
  if (!holds) broken(property, detail);
}

// Runs `step`. Returns the message of the UserError it threw, checked to be one non-empty line,
// or nullopt when it returned. Any other exception is an "internal error" that input reached.
template <class Step>
std::optional<std::string> refusal(Step&& step) {
  try {
    step();
    return std::nullopt;
  } catch (const UserError& e) {
    const std::string message = e.what();
    check(!message.empty() && message.find_first_of("\n\r") == std::string::npos,
          "a UserError is one non-empty line", message);
    return message;
  } catch (const std::exception& e) {
    broken("only UserError escapes a reader (no internal error from input)", e.what());
  }
}

}  // namespace hpc::fuzz
