#pragma once
// Internal to the YAML reader (yaml_tree.cpp, yaml_scalar.cpp): the core-schema scalar rules
// of GitHub's reader (actions/runner YamlObjectReader.cs MatchNull, MatchBoolean,
// MatchInteger, MatchFloat), which the tags are checked against too.

#include <string_view>

namespace jobs::yaml_detail {

bool is_null_text(std::string_view text);
bool is_true_text(std::string_view text);
bool is_false_text(std::string_view text);
// [0-9]+, [-+][0-9]+, 0x[0-9a-fA-F]+ and 0o[0-7]+; `range_error` for a hex or octal value
// beyond 32 bits (refused, as GitHub's Int32 parsers refuse it).
bool match_integer(std::string_view text, double& value, bool& range_error);
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? and [-+]?.inf, .nan in their spellings.
bool match_float(std::string_view text, double& value);

}  // namespace jobs::yaml_detail
