#include "jobs/workflow/template_schema.hpp"

#include <unordered_map>

namespace jobs::schema {
namespace {

using namespace std::string_view_literals;

// GitHub's built-in types (template-schema.ts): `sequence` of any, `mapping` of string to any,
// and `any`, the one-of every kind.
constexpr std::string_view k_any_of[] = {"null"sv,   "boolean"sv,  "number"sv,
                                         "string"sv, "sequence"sv, "mapping"sv};
constexpr Definition k_builtins[] = {
    {.name = "null"sv, .kind = Kind::null},
    {.name = "boolean"sv, .kind = Kind::boolean},
    {.name = "number"sv, .kind = Kind::number},
    {.name = "string"sv, .kind = Kind::string},
    {.name = "sequence"sv, .kind = Kind::sequence, .item_type = "any"sv},
    {.name = "mapping"sv,
     .kind = Kind::mapping,
     .loose_key_type = "string"sv,
     .loose_value_type = "any"sv},
    {.name = "any"sv, .kind = Kind::one_of, .one_of = k_any_of},
};

using Index = std::unordered_map<std::string_view, const Definition*>;

Index make_index(const Schema& schema) {
    Index index;
    for (const auto& definition : k_builtins) index[definition.name] = &definition;
    for (const auto& definition : schema.definitions) index[definition.name] = &definition;
    return index;
}

std::string_view kind_name(Kind kind) {
    switch (kind) {
        case Kind::null:
            return "null";
        case Kind::boolean:
            return "boolean";
        case Kind::number:
            return "number";
        case Kind::string:
            return "string";
        case Kind::sequence:
            return "sequence";
        case Kind::mapping:
            return "mapping";
        case Kind::one_of:
            return "one-of";
        case Kind::allowed_values:
            return "allowed-values";
    }
    return "null";
}

std::string join(std::span<const std::string_view> items) {
    std::string out;
    for (auto item : items) {
        if (!out.empty()) out += ",";
        out += item;
    }
    return out;
}

}  // namespace

const Definition* Schema::find(std::string_view name) const {
    static const Index workflow = make_index(workflow_schema());
    static const Index action = make_index(action_schema());
    const Index& index = this == &workflow_schema() ? workflow : action;
    const auto found = index.find(name);
    return found == index.end() ? nullptr : found->second;
}

std::span<const Definition> builtin_definitions() {
    return k_builtins;
}

std::string describe(const Definition& d) {
    std::string out(kind_name(d.kind));
    if (!d.context.empty()) out += " context=" + join(d.context);
    if (!d.properties.empty()) {
        out += " properties=";
        bool first = true;
        for (const auto& property : d.properties) {
            out += (first ? "" : ",") + std::string(property.name) + ":" +
                   std::string(property.type) + (property.required ? "!" : "");
            first = false;
        }
    }
    if (!d.loose_key_type.empty() || !d.loose_value_type.empty())
        out += " loose=" + std::string(d.loose_key_type) + "->" + std::string(d.loose_value_type);
    if (!d.item_type.empty()) out += " item=" + std::string(d.item_type);
    if (!d.one_of.empty())
        out += (d.kind == Kind::allowed_values ? " values=" : " one-of=") + join(d.one_of);
    if (!d.constant.empty()) out += " constant=" + std::string(d.constant);
    if (d.require_non_empty) out += " require-non-empty";
    if (d.is_expression) out += " is-expression";
    if (d.ignore_case) out += " ignore-case";
    return out;
}

}  // namespace jobs::schema
