// Reading the project's JSON files: comments (// and /* */) allowed, errors as file:line:column.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace hpc {

// Parses `text` (named `origin` in messages). Throws UserError "origin:L:C: ..." on bad JSON.
nlohmann::json parse_json_text(
    const std::string& text, const std::string& origin,
    const std::string& fix = "fix the file (comments are allowed, trailing commas are not)");

// Reads and parses a file. Throws UserError when it cannot be read or parsed.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Reads a whole file into a string; UserError naming the file and the reason on failure.
std::string read_text_file(const std::filesystem::path& path, const std::string& what = "file");

// Line and column (1-based) of a byte offset in text.
std::pair<int, int> line_column_at(const std::string& text, size_t byte_offset);

}  // namespace hpc
