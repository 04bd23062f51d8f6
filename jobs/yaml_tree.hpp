#pragma once
// A parsed YAML document as a plain, immutable tree that remembers where every node came
// from (file:line:col). The workflow model keeps these for values that are only evaluated at
// run time (env maps, `with`, matrices), so that the model can be shared between threads
// (yaml-cpp's own nodes cannot be read concurrently) and every later error can still name
// the line it comes from.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/error.hpp"

namespace jobs {

// A position in a source file; line and column are 1-based (0 when unknown).
struct SourceMark {
    std::string file;
    int line = 0;
    int column = 0;
};

// "file:line:col" (or "file" when the position is unknown).
std::string to_string(const SourceMark& mark);

// "file:line:col: message": the one-line form of every workflow error.
std::string located(const SourceMark& mark, std::string_view message);

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

// Parses one YAML document. `display_name` names the file in marks and errors. Errors
// (syntax, duplicate keys, non-scalar keys, a second document) are invalid_input with the
// "file:line:col: message" form.
sandbox::Expected<YamlNode> parse_yaml(std::string_view text, std::string_view display_name);

// Reads and parses a file; the path as given is the display name.
sandbox::Expected<YamlNode> load_yaml_file(const std::string& path);

}  // namespace jobs
