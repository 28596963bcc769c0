// Reading the project's JSON files: comments (// and /* */) allowed, errors as file:line:column.
// Stricter than JSON's grammar where silence would change what runs: a key given twice in one
// object, a NUL byte, a number no double can hold, nesting deeper than kMaxJsonDepth are errors.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace hpc {

// Far deeper than any hpclaunch file (they nest 4 levels), shallow enough that the recursive
// code that walks a document (copies, merges, dumps) never runs out of stack.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` (named `origin` in messages). Throws UserError "origin:L:C: ..." on bad JSON,
// a duplicate key, a NUL byte, a number out of a double's range, or nesting too deep.
nlohmann::json parse_json_text(
    const std::string& text, const std::string& origin,
    const std::string& fix = "fix the file (comments are allowed, trailing commas are not)");

// Reads (read_input_file: a regular file, at most 4 MiB) and parses a file. Throws UserError
// when it cannot be read or parsed.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Line and column (1-based) of a byte offset in text.
std::pair<int, int> line_column_at(const std::string& text, size_t byte_offset);

}  // namespace hpc
