#pragma once
// A parsed YAML document as a plain, immutable tree that remembers where every node came
// from (file:line:col). The workflow model keeps these for values that are only evaluated at
// run time (env maps, `with`, matrices), so that the model can be shared between threads
// and every later error can still name the line it comes from.
//
// The reader is GitHub's (actions/runner src/Sdk/WorkflowParser/Conversion/YamlObjectReader.cs
// with anchors allowed, as github.com reads workflows since 2025): libyaml's event parser, no
// recursion, and GitHub's bounds: at most 1 MiB of characters (ParseOptions.MaxFileSize), 50
// levels of nesting (ParseOptions.MaxDepth), 50,000 parse events counting every event an
// alias replays (c_maxYamlNodes: "billion laughs" stops there) and 10 MiB of scalar text
// (ParseOptions.MaxResultSize). Scalars resolve under the YAML 1.2 core schema; the only tags
// allowed are the core ones (!!str, !!int, !!float, !!bool, !!null), and a tagged scalar must
// be valid for its tag (`!!int abc` is refused). A hex or octal integer must fit 32 bits, as
// in GitHub's reader. Duplicate keys are refused ("'k' is already defined").

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace jobs {

// A position in a source file; line and column are 1-based (0 when unknown).
struct SourceMark {
    std::string file;
    int line = 0;
    int column = 0;
};

// "file:line:col" (or "file" when the position is unknown).
std::string to_string(const SourceMark& mark);

// "file:line:col: message": the one-line form of every workflow error. Whatever bytes the
// message holds, the result is one line of printable text: control characters (NUL, newline,
// ESC, ...) are escaped as \n, \t, \r or \xNN.
std::string located(const SourceMark& mark, std::string_view message);

// `text` with control characters escaped as located() does, for any one-line message built
// from input.
std::string one_line(std::string_view text);

struct YamlEntry;

struct YamlNode {
    enum class Kind { null, scalar, sequence, mapping };
    // How a scalar reads under the YAML 1.2 core schema (what GitHub applies).
    enum class ScalarType { null, boolean, number, string };

    Kind kind = Kind::null;
    std::string text;    // scalars: the text as written (quotes removed)
    bool plain = false;  // scalars: unquoted, so `true`, `1.5` and `null` keep their type
    SourceMark mark;
    std::vector<YamlNode> items;     // sequences
    std::vector<YamlEntry> entries;  // mappings, in document order, keys unique

    bool is_null() const { return kind == Kind::null; }
    bool is_scalar() const { return kind == Kind::scalar; }
    bool is_sequence() const { return kind == Kind::sequence; }
    bool is_mapping() const { return kind == Kind::mapping; }

    // The entry's value for `key`, or nullptr (mappings only; case-sensitive).
    const YamlNode* find(std::string_view key) const;

    ScalarType scalar_type() const;
    bool as_bool() const;      // for ScalarType::boolean
    double as_number() const;  // for ScalarType::number (0x.., 0o.., .inf, .nan included)
    // "mapping", "sequence", "string", "boolean", "number" or "null", for error messages.
    std::string_view type_name() const;
};

struct YamlEntry {
    std::string key;
    SourceMark key_mark;
    YamlNode value;
};

// Limits of the reader (see the top of this file).
inline constexpr std::size_t k_yaml_max_chars = 1024 * 1024;
inline constexpr int k_yaml_max_depth = 50;
inline constexpr std::size_t k_yaml_max_events = 50000;
inline constexpr std::size_t k_yaml_max_bytes = 10 * 1024 * 1024;

// Parses one YAML document. `display_name` names the file in marks and errors. Errors
// (syntax, the limits above, tags, duplicate keys, non-scalar keys, unknown aliases, a second
// document) are invalid_input with the one-line "file:line:col: message" form.
common::Expected<YamlNode> parse_yaml(std::string_view text, std::string_view display_name);

// Reads and parses a file; the path as given is the display name.
common::Expected<YamlNode> load_yaml_file(const std::string& path);

// The core-schema reading of a plain scalar (GitHub's MatchNull, MatchBoolean, MatchInteger
// and MatchFloat). For numbers, `value` receives the number; `out_of_range` is set for a hex
// or octal integer beyond 32 bits (GitHub refuses those rather than reading them).
YamlNode::ScalarType resolve_plain_scalar(std::string_view text, double* value = nullptr,
                                          bool* out_of_range = nullptr);

}  // namespace jobs
