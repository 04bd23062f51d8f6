// The template reader: a port of GitHub's (see template_reader.hpp), stopping at the first
// error. Recursion follows the YAML tree, whose depth the reader bounds (k_yaml_max_depth).
#include "jobs/workflow/template_reader.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>
#include <vector>

#include "common/strings.hpp"
#include "jobs/expr/expr.hpp"
#include "jobs/expr/expr_lexer.hpp"
#include "jobs/expr/value.hpp"

namespace jobs {
namespace {

using common::trim;

using schema::Definition;
using schema::Kind;

constexpr std::string_view k_open = "${{";
constexpr std::string_view k_insert = "insert";

std::string in_quotes(std::string_view text) {
    return "'" + std::string(text) + "'";
}

// What a scalar is once its `${{ }}` are read.
struct Scalar {
    enum class Type { null, boolean, number, string, expression, insert } type = Type::string;
    std::string text;  // the literal's text (string value, or as written), or the expression
    bool boolean = false;
};

std::string display(const Scalar& scalar) {
    switch (scalar.type) {
        case Scalar::Type::null:
            return "";
        case Scalar::Type::insert:
            return "${{ insert }}";
        case Scalar::Type::expression:
            return "${{ " + scalar.text + " }}";
        default:
            return scalar.text;
    }
}

// The literal text of `${{ 'a''b' }}`: GitHub's getExpressionString.
std::optional<std::string> string_literal(std::string_view expression) {
    std::string out;
    bool in_string = false;
    for (std::size_t i = 0; i < expression.size(); ++i) {
        const char c = expression[i];
        if (c == '\'') {
            in_string = !in_string;
            if (in_string && i != 0) out.push_back(c);
        } else if (!in_string) {
            return std::nullopt;
        } else {
            out.push_back(c);
        }
    }
    return out;
}

// GitHub's matchDirective for `insert` with no parameters: nullopt when not the directive,
// an error message when it is with parameters.
std::optional<std::string> insert_directive(std::string_view trimmed, bool& is_directive) {
    is_directive = false;
    if (!trimmed.starts_with(k_insert)) return std::nullopt;
    if (trimmed.size() != k_insert.size() &&
        !std::isspace(static_cast<unsigned char>(trimmed[k_insert.size()])))
        return std::nullopt;
    is_directive = true;
    const std::string_view rest = trim(trimmed.substr(k_insert.size()));
    if (rest.empty()) return std::nullopt;
    std::size_t parameters = 0;
    bool in_string = false, in_word = false;
    int parens = 0;
    for (char c : rest) {
        const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
        if (space && !in_string && parens == 0) {
            in_word = false;
            continue;
        }
        if (!in_word) ++parameters, in_word = true;
        if (c == '\'')
            in_string = !in_string;
        else if (c == '(' && !in_string)
            ++parens;
        else if (c == ')' && !in_string)
            --parens;
    }
    return "Exactly 0 parameter(s) were expected following the directive 'insert'. Actual "
           "parameter count: " +
           std::to_string(parameters);
}

class Reader {
public:
    Reader(const schema::Schema& schema, const TemplateReadOptions& options)
        : m_schema(schema), m_options(options) {
        m_contexts.emplace_back();  // id 0: no context
    }

    bool read_root(std::string_view type, const YamlNode& root) {
        const Definition* definition = lookup(type);
        if (definition == nullptr) return false;
        return read_value(root, Info{definition, derive(0, definition)});
    }

    const std::string& error() const { return m_error; }

private:
    struct Info {
        const Definition* definition;
        int context;  // index into m_contexts
    };

    const Definition* lookup(std::string_view name) {
        const Definition* found = m_schema.find(name);
        if (found == nullptr)
            m_error = "the template schema has no definition '" + std::string(name) + "'";
        return found;
    }

    // GitHub's DefinitionInfo: a definition with a context adds it to its parent's.
    int derive(int parent, const Definition* definition) {
        if (definition->context.empty()) return parent;
        const auto key = std::make_pair(parent, definition);
        if (const auto found = m_derived.find(key); found != m_derived.end()) return found->second;
        std::vector<std::string_view> merged = m_contexts[static_cast<std::size_t>(parent)];
        for (auto entry : definition->context) {
            const bool seen = std::ranges::any_of(
                merged, [&](std::string_view known) { return equals_ignore_case(known, entry); });
            if (!seen) merged.push_back(entry);
        }
        m_contexts.push_back(std::move(merged));
        const int id = static_cast<int>(m_contexts.size() - 1);
        m_derived[key] = id;
        return id;
    }

    bool child(const Info& parent, std::string_view type, Info& out) {
        const Definition* definition = lookup(type);
        if (definition == nullptr) return false;
        out = Info{definition, derive(parent.context, definition)};
        return true;
    }

    const AllowedContext& allowed(int context) {
        auto& cached = m_allowed[context];
        if (!cached) cached = split_allowed_context(m_contexts[static_cast<std::size_t>(context)]);
        return *cached;
    }

    bool has_context(const Info& info) const {
        return !m_contexts[static_cast<std::size_t>(info.context)].empty();
    }

    bool fail(const SourceMark& mark, std::string_view message) {
        if (m_error.empty()) m_error = located(mark, message);
        return false;
    }

    // ---- definitions ----

    // getDefinitionsOfType: the definition itself or the members of a one-of (one level).
    std::vector<const Definition*> of_kind(const Definition* definition, Kind kind) {
        std::vector<const Definition*> out;
        if (definition->kind == kind) {
            out.push_back(definition);
        } else if (definition->kind == Kind::one_of) {
            for (auto name : definition->one_of) {
                const Definition* member = m_schema.find(name);
                if (member != nullptr && member->kind == kind) out.push_back(member);
            }
        }
        return out;
    }

    // getScalarDefinitions, with allowed-values as string constants: true when one matches.
    bool scalar_matches(const Definition* definition, const Scalar& scalar, int depth = 0) {
        if (depth > 16) return false;  // one-of cycles are not GitHub's, but stay bounded
        switch (definition->kind) {
            case Kind::null:
                return scalar.type == Scalar::Type::null;
            case Kind::boolean:
                return scalar.type == Scalar::Type::boolean;
            case Kind::number:
                return scalar.type == Scalar::Type::number;
            case Kind::string:
                if (scalar.type != Scalar::Type::string) return false;
                if (!definition->constant.empty())
                    return definition->ignore_case
                               ? equals_ignore_case(definition->constant, scalar.text)
                               : definition->constant == scalar.text;
                return !definition->require_non_empty || !scalar.text.empty();
            case Kind::allowed_values:
                return scalar.type == Scalar::Type::string &&
                       std::ranges::find(definition->one_of, std::string_view(scalar.text)) !=
                           definition->one_of.end();
            case Kind::one_of:
                for (auto name : definition->one_of) {
                    const Definition* member = m_schema.find(name);
                    if (member != nullptr && scalar_matches(member, scalar, depth + 1)) return true;
                }
                return false;
            case Kind::sequence:
            case Kind::mapping:
                return false;
        }
        return false;
    }

    // ---- scalars ----

    static Scalar literal_of(const YamlNode& node) {
        Scalar scalar;
        if (node.is_null()) {
            scalar.type = Scalar::Type::null;
            return scalar;
        }
        scalar.text = node.text;
        switch (node.scalar_type()) {
            case YamlNode::ScalarType::null:
                scalar.type = Scalar::Type::null;
                break;
            case YamlNode::ScalarType::boolean:
                scalar.type = Scalar::Type::boolean;
                scalar.boolean = node.as_bool();
                scalar.text = scalar.boolean ? "true" : "false";
                break;
            case YamlNode::ScalarType::number:
                scalar.type = Scalar::Type::number;
                scalar.text = format_number(node.as_number());
                break;
            case YamlNode::ScalarType::string:
                scalar.type = Scalar::Type::string;
                break;
        }
        return scalar;
    }

    // GitHub's parseScalar: a string holding `${{ }}` becomes an expression (or a literal,
    // for `${{ 'text' }}`), each expression checked against the allowed context.
    bool parse_scalar(const YamlNode& node, const std::string& raw_text, const Info& info,
                      Scalar& out) {
        out.type = Scalar::Type::string;
        out.text = raw_text;
        if (raw_text.find(k_open) == std::string::npos) return true;
        const std::string_view raw = raw_text;
        struct Segment {
            bool expression;
            std::string text;
        };
        std::vector<Segment> segments;
        std::size_t i = 0;
        std::size_t start = raw.find(k_open);
        while (i < raw.size()) {
            if (i == start) {
                std::size_t end = std::string_view::npos;
                bool in_string = false;
                for (i += k_open.size(); i < raw.size(); ++i) {
                    if (raw[i] == '\'') {
                        in_string = !in_string;
                    } else if (!in_string && raw[i] == '}' && raw[i - 1] == '}') {
                        end = i;
                        ++i;
                        break;
                    }
                }
                if (end == std::string_view::npos)
                    return fail(
                        node.mark,
                        "The expression is not closed. An unescaped ${{ sequence was found, but "
                        "the closing }} sequence was not found.");
                const std::string_view inner =
                    raw.substr(start + k_open.size(), end - 1 - start - k_open.size());
                const std::string_view trimmed = trim(inner);
                if (trimmed.empty()) return fail(node.mark, "An expression was expected");
                bool is_directive = false;
                if (auto bad = insert_directive(trimmed, is_directive))
                    return fail(node.mark, *bad);
                if (is_directive) {
                    if (start != 0 || i < raw.size())
                        return fail(
                            node.mark,
                            "The directive 'insert' is not allowed in this context. Directives are "
                            "not supported for expressions that are embedded within a string. "
                            "Directives are only supported when the entire value is an "
                            "expression.");
                    out.type = Scalar::Type::insert;
                    out.text.clear();
                    return true;
                }
                if (auto valid = validate_expression(trimmed, allowed(info.context)); !valid)
                    return fail(node.mark, valid.error().message);
                segments.push_back({true, std::string(trimmed)});
                start = raw.find(k_open, i);
            } else if (i < start) {
                append_text(segments, raw.substr(i, start - i));
                i = start;
            } else {
                append_text(segments, raw.substr(i));
                break;
            }
        }
        if (segments.size() == 1 && segments[0].expression) {
            if (auto text = string_literal(segments[0].text)) {
                out.type = Scalar::Type::string;
                out.text = std::move(*text);
                return true;
            }
            out.type = Scalar::Type::expression;
            out.text = std::move(segments[0].text);
            return true;
        }
        out.type = Scalar::Type::expression;
        out.text = format_expression(segments);
        if (out.text.size() > expr_detail::k_max_expression_length)
            return fail(node.mark, "Exceeded max expression length " +
                                       std::to_string(expr_detail::k_max_expression_length));
        return true;
    }

    template <typename Segments>
    static void append_text(Segments& segments, std::string_view text) {
        if (!segments.empty() && !segments.back().expression)
            segments.back().text += text;
        else
            segments.push_back({false, std::string(text)});
    }

    // format('literal {0} text', expr0): the expression GitHub makes of a mixed string.
    template <typename Segments>
    static std::string format_expression(const Segments& segments) {
        std::string format, args;
        std::size_t index = 0;
        for (const auto& segment : segments) {
            if (!segment.expression) {
                for (char c : segment.text) {
                    if (c == '\'')
                        format += "''";
                    else if (c == '{')
                        format += "{{";
                    else if (c == '}')
                        format += "}}";
                    else
                        format.push_back(c);
                }
                continue;
            }
            format += "{" + std::to_string(index++) + "}";
            args += ", " + segment.text;
        }
        return "format('" + format + "'" + args + ")";
    }

    bool read_scalar(const YamlNode& node, const Info& info) {
        Scalar scalar = literal_of(node);
        if (scalar.type == Scalar::Type::string && !parse_scalar(node, node.text, info, scalar))
            return false;
        if (!validate(node.mark, scalar, info)) return false;
        return check_condition(node, scalar, info);
    }

    // GitHub's validate: a literal must match a scalar definition (a non-string one may pass
    // as its string form); an expression needs a context.
    bool validate(const SourceMark& mark, const Scalar& scalar, const Info& info) {
        if (scalar.type == Scalar::Type::expression) {
            if (!has_context(info))
                return fail(mark, "A template expression is not allowed in this context");
            return true;
        }
        if (scalar.type == Scalar::Type::insert)
            return fail(mark, "Unexpected value '${{ insert }}'");
        if (scalar_matches(info.definition, scalar)) return true;
        if (scalar.type != Scalar::Type::string) {
            Scalar as_string;
            as_string.type = Scalar::Type::string;
            as_string.text = display(scalar);
            if (scalar_matches(info.definition, as_string)) return true;
        }
        return fail(mark, "Unexpected value " + in_quotes(display(scalar)));
    }

    // GitHub's convertToIfCondition for the condition definitions.
    bool check_condition(const YamlNode& node, const Scalar& scalar, const Info& info) {
        if (!std::ranges::any_of(m_options.condition_types, [&](std::string_view type) {
                return type == info.definition->name;
            }))
            return true;
        std::string condition = scalar.type == Scalar::Type::expression
                                    ? scalar.text
                                    : std::string(trim(display(scalar)));
        if (condition.empty()) return true;
        // ensureStatusFunction: a condition that parses and calls no status function is
        // checked as `success() && (condition)`; one that does not parse reports its own error.
        const AllowedContext& context = allowed(info.context);
        if (auto valid = validate_expression(condition, context); !valid)
            return fail(node.mark, valid.error().message);
        if (calls_status_function(condition, context)) return true;
        if (auto valid = validate_expression("success() && (" + condition + ")", context); !valid)
            return fail(node.mark, valid.error().message);
        return true;
    }

    // ---- collections ----

    bool read_value(const YamlNode& node, const Info& info) {
        if (node.is_scalar() || node.is_null()) return read_scalar(node, info);
        if (node.is_sequence()) {
            const auto sequences = of_kind(info.definition, Kind::sequence);
            if (sequences.empty()) return fail(node.mark, "A sequence was not expected");
            Info item{};
            if (!child(info, sequences[0]->item_type, item)) return false;
            for (const auto& element : node.items) {
                if (!read_value(element, item)) return false;
            }
            return true;
        }
        auto mappings = of_kind(info.definition, Kind::mapping);
        if (mappings.empty()) return fail(node.mark, "A mapping was not expected");
        if (mappings.size() > 1 || !mappings[0]->properties.empty() ||
            mappings[0]->loose_key_type.empty())
            return read_known_mapping(node, info, std::move(mappings));
        return read_loose_mapping(node, info, *mappings[0]);
    }

    // A key: a string, or an expression (then its value is read as `any`, where allowed).
    enum class KeyResult { failed, expression, literal };

    KeyResult read_key(const YamlEntry& entry, const Info& info, Scalar& key) {
        YamlNode key_node;
        key_node.mark = entry.key_mark;
        if (!parse_scalar(key_node, entry.key, info, key)) return KeyResult::failed;
        if (key.type != Scalar::Type::expression && key.type != Scalar::Type::insert)
            return KeyResult::literal;
        if (!has_context(info)) {
            fail(entry.key_mark, "A template expression is not allowed in this context");
            return KeyResult::failed;
        }
        return KeyResult::expression;
    }

    bool check_duplicate(const YamlEntry& entry, const Scalar& key,
                         std::unordered_set<std::string>& seen) {
        if (key.text.empty()) return true;
        if (!seen.insert(fold_case(key.text)).second)
            return fail(entry.key_mark, in_quotes(key.text) + " is already defined");
        return true;
    }

    // GitHub's matchPropertyAndFilter: the property's type when some definition has it, and
    // the definitions without it dropped.
    const schema::Property* match_property(std::vector<const Definition*>& mappings,
                                           std::string_view name) {
        const schema::Property* found = nullptr;
        bool missing_somewhere = false;
        for (const auto* mapping : mappings) {
            const auto it = std::ranges::find(mapping->properties, name, &schema::Property::name);
            if (it != mapping->properties.end())
                found = &*it;
            else
                missing_somewhere = true;
        }
        if (found != nullptr && missing_somewhere) {
            std::erase_if(mappings, [&](const Definition* mapping) {
                return std::ranges::find(mapping->properties, name, &schema::Property::name) ==
                       mapping->properties.end();
            });
        }
        return found;
    }

    static bool is_background_property(std::string_view name) {
        return name == "background" || name == "wait" || name == "wait-all" || name == "cancel";
    }

    bool read_known_mapping(const YamlNode& node, const Info& info,
                            std::vector<const Definition*> mappings) {
        const std::string_view loose_key = mappings[0]->loose_key_type;
        const std::string_view loose_value = mappings[0]->loose_value_type;
        std::unordered_set<std::string> seen;
        bool has_expression_key = false;
        for (const auto& entry : node.entries) {
            Scalar key;
            const KeyResult kind = read_key(entry, info, key);
            if (kind == KeyResult::failed) return false;
            Info value_info{};
            if (kind == KeyResult::expression) {
                has_expression_key = true;
                if (!child(info, "any", value_info) || !read_value(entry.value, value_info))
                    return false;
                continue;
            }
            if (!check_duplicate(entry, key, seen)) return false;
            if (const auto* property = match_property(mappings, key.text)) {
                if (!m_options.background_steps && is_background_property(key.text))
                    return fail(entry.key_mark, "Unexpected value " + in_quotes(key.text));
                if (!child(info, property->type, value_info) ||
                    !read_value(entry.value, value_info))
                    return false;
                continue;
            }
            if (!loose_key.empty()) {
                Info key_info{};
                if (!child(info, loose_key, key_info) || !validate(entry.key_mark, key, key_info))
                    return false;
                if (!child(info, loose_value, value_info) || !read_value(entry.value, value_info))
                    return false;
                continue;
            }
            return fail(entry.key_mark, "Unexpected value " + in_quotes(key.text));
        }
        if (mappings.size() > 1) return fail(node.mark, ambiguity(mappings));
        if (!has_expression_key) {
            for (const auto& property : mappings[0]->properties) {
                if (!property.required || is_optional(*mappings[0], property)) continue;
                if (!seen.contains(fold_case(property.name)))
                    return fail(node.mark,
                                "Required property is missing: " + std::string(property.name));
            }
        }
        return true;
    }

    bool is_optional(const Definition& mapping, const schema::Property& property) const {
        return std::ranges::any_of(m_options.optional_properties, [&](std::string_view entry) {
            return entry.size() == mapping.name.size() + 1 + property.name.size() &&
                   entry.starts_with(mapping.name) && entry[mapping.name.size()] == '/' &&
                   entry.ends_with(property.name);
        });
    }

    std::string ambiguity(const std::vector<const Definition*>& mappings) const {
        std::map<std::string_view, int> hits;
        for (const auto* mapping : mappings) {
            for (const auto& property : mapping->properties) ++hits[property.name];
        }
        std::vector<std::string_view> unique;
        for (const auto& [name, count] : hits) {
            if (count != 1) continue;
            if (!m_options.background_steps &&
                (name == "wait" || name == "wait-all" || name == "cancel"))
                continue;
            unique.push_back(name);
        }
        std::string list;
        for (auto name : unique) list += (list.empty() ? "" : ", ") + std::string(name);
        return "There's not enough info to determine what you meant. Add one of these "
               "properties: " +
               list;
    }

    bool read_loose_mapping(const YamlNode& node, const Info& info, const Definition& mapping) {
        Info key_info{}, value_info{};
        if (!child(info, mapping.loose_key_type, key_info) ||
            !child(info, mapping.loose_value_type, value_info))
            return false;
        std::unordered_set<std::string> seen;
        for (const auto& entry : node.entries) {
            Scalar key;
            const KeyResult kind = read_key(entry, info, key);
            if (kind == KeyResult::failed) return false;
            if (kind == KeyResult::literal) {
                if (!check_duplicate(entry, key, seen) || !validate(entry.key_mark, key, key_info))
                    return false;
            }
            if (!read_value(entry.value, value_info)) return false;
        }
        return true;
    }

    const schema::Schema& m_schema;
    const TemplateReadOptions& m_options;
    std::string m_error;
    std::vector<std::vector<std::string_view>> m_contexts;
    std::map<std::pair<int, const Definition*>, int> m_derived;
    std::map<int, std::optional<AllowedContext>> m_allowed;
};

}  // namespace

common::Expected<void> read_template(const schema::Schema& schema, std::string_view type,
                                     const YamlNode& root, const TemplateReadOptions& options) {
    Reader reader(schema, options);
    if (!reader.read_root(type, root))
        return common::fail(common::ErrorKind::invalid_input, reader.error());
    return {};
}

bool split_expressions(std::string_view text, std::vector<std::string_view>& expressions) {
    expressions.clear();
    std::size_t index = 0;
    while ((index = text.find(k_open, index)) != std::string_view::npos) {
        bool in_string = false;
        std::size_t end = std::string_view::npos;
        for (std::size_t i = index + k_open.size(); i + 1 < text.size(); ++i) {
            if (text[i] == '\'') {
                in_string = !in_string;
            } else if (!in_string && text[i] == '}' && text[i + 1] == '}') {
                end = i;
                break;
            }
        }
        if (end == std::string_view::npos) return false;
        expressions.push_back(text.substr(index + k_open.size(), end - index - k_open.size()));
        index = end + 2;
    }
    return true;
}

bool is_insert_directive(std::string_view text) {
    if (!text.starts_with(k_open) || !text.ends_with("}}")) return false;
    return trim(text.substr(k_open.size(), text.size() - k_open.size() - 2)) == k_insert;
}

}  // namespace jobs
