# cmake -DINPUT=FILE -DOUTPUT=FILE.cc -DSYMBOL=NAME -P embed_text.cmake
# Writes a C++ source that defines `std::string_view hpc::NAME()`, returning FILE's text as built
# (the job library of templates/job-library.sh: the same bytes in every script of a version).
file(READ "${INPUT}" text)
string(FIND "${text}" ")hpc_embedded\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )hpc_embedded\"")
endif()
set(body "// Generated from ${INPUT} by cmake/embed_text.cmake: do not edit.\n")
string(APPEND body "#include <string_view>\n\nnamespace hpc {\n")
string(APPEND body "std::string_view ${SYMBOL}() {\n  static constexpr std::string_view text =\n")
string(APPEND body "      R\"hpc_embedded(${text})hpc_embedded\";\n  return text;\n}\n}  // namespace hpc\n")
# Rewritten only when it changes, so that a rebuild compiles it only then.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL body)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${body}")
