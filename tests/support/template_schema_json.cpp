#include "tests/support/template_schema_json.hpp"

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace tests {
namespace {

using Json = nlohmann::ordered_json;

// One definition as read from the file, in the form both outputs are made from.
struct Def {
    std::string name;
    std::string kind;
    std::vector<std::string> context;
    std::vector<std::tuple<std::string, std::string, bool>> properties;
    std::string loose_key, loose_value, item;
    std::vector<std::string> one_of;
    std::string constant;
    bool non_empty = false, is_expression = false, ignore_case = false;
};

[[noreturn]] void unknown(const std::string& where, const std::string& key) {
    throw std::runtime_error(where + ": unknown field '" + key + "'");
}

std::vector<std::string> strings(const Json& list, const std::string& where) {
    if (!list.is_array()) throw std::runtime_error(where + " is not a list");
    std::vector<std::string> out;
    for (const auto& item : list) {
        if (!item.is_string()) throw std::runtime_error(where + " holds a non-string");
        out.push_back(item.get<std::string>());
    }
    return out;
}

void read_mapping(const Json& body, Def& def) {
    for (const auto& [key, value] : body.items()) {
        if (key == "properties") {
            for (const auto& [name, property] : value.items()) {
                if (property.is_string()) {
                    def.properties.emplace_back(name, property.get<std::string>(), false);
                    continue;
                }
                std::string type;
                bool required = false;
                for (const auto& [field, field_value] : property.items()) {
                    if (field == "type")
                        type = field_value.get<std::string>();
                    else if (field == "required")
                        required = field_value.get<bool>();
                    else if (field != "description")
                        unknown(def.name + ".properties." + name, field);
                }
                def.properties.emplace_back(name, type, required);
            }
        } else if (key == "loose-key-type") {
            def.loose_key = value.get<std::string>();
        } else if (key == "loose-value-type") {
            def.loose_value = value.get<std::string>();
        } else {
            unknown(def.name + ".mapping", key);
        }
    }
}

void read_string(const Json& body, Def& def) {
    for (const auto& [key, value] : body.items()) {
        if (key == "constant")
            def.constant = value.get<std::string>();
        else if (key == "require-non-empty")
            def.non_empty = value.get<bool>();
        else if (key == "is-expression")
            def.is_expression = value.get<bool>();
        else if (key == "ignore-case")
            def.ignore_case = value.get<bool>();
        else
            unknown(def.name + ".string", key);
    }
}

Def read_definition(const std::string& name, const Json& node) {
    Def def;
    def.name = name;
    for (const auto& [key, value] : node.items()) {
        if (key == "description") continue;
        if (key == "context") {
            def.context = strings(value, name + ".context");
            continue;
        }
        if (!def.kind.empty()) throw std::runtime_error(name + ": more than one kind");
        def.kind = key;
        if (key == "mapping") {
            read_mapping(value, def);
        } else if (key == "sequence") {
            for (const auto& [field, field_value] : value.items()) {
                if (field == "item-type")
                    def.item = field_value.get<std::string>();
                else
                    unknown(name + ".sequence", field);
            }
        } else if (key == "one-of" || key == "allowed-values") {
            def.one_of = strings(value, name + "." + key);
        } else if (key == "string") {
            read_string(value, def);
        } else if (key == "number" || key == "boolean" || key == "null") {
            if (!value.is_object() || !value.empty())
                throw std::runtime_error(name + "." + key + " has fields");
        } else {
            unknown(name, key);
        }
    }
    if (def.kind.empty()) throw std::runtime_error(name + ": no kind");
    return def;
}

std::vector<Def> read_definitions(const Json& document, std::string& version) {
    std::vector<Def> out;
    for (const auto& [key, value] : document.items()) {
        if (key == "version")
            version = value.get<std::string>();
        else if (key != "definitions")
            unknown("schema", key);
    }
    for (const auto& [name, node] : document.at("definitions").items())
        out.push_back(read_definition(name, node));
    return out;
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
    return out;
}

// jobs::schema::describe()'s form (template_schema.cpp), from the file's side.
std::string describe(const Def& def) {
    std::string out = def.kind;
    if (!def.context.empty()) out += " context=" + join(def.context);
    if (!def.properties.empty()) {
        out += " properties=";
        bool first = true;
        for (const auto& [name, type, required] : def.properties) {
            out += (first ? "" : ",") + name + ":" + type + (required ? "!" : "");
            first = false;
        }
    }
    if (!def.loose_key.empty() || !def.loose_value.empty())
        out += " loose=" + def.loose_key + "->" + def.loose_value;
    if (!def.item.empty()) out += " item=" + def.item;
    if (!def.one_of.empty())
        out += (def.kind == "allowed-values" ? " values=" : " one-of=") + join(def.one_of);
    if (!def.constant.empty()) out += " constant=" + def.constant;
    if (def.non_empty) out += " require-non-empty";
    if (def.is_expression) out += " is-expression";
    if (def.ignore_case) out += " ignore-case";
    return out;
}

std::string literal(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    return out + "\"";
}

std::string kind_enum(const std::string& kind) {
    if (kind == "one-of") return "Kind::one_of";
    if (kind == "allowed-values") return "Kind::allowed_values";
    return "Kind::" + kind;
}

// Lists of strings, six to a line.
std::string string_list(const std::vector<std::string>& items) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i % 6 == 0) out += "\n    ";
        out += literal(items[i]) + "sv,";
    }
    return out;
}

void generate(std::ostringstream& out, const std::string& prefix, const std::vector<Def>& defs,
              const std::string& version) {
    for (std::size_t i = 0; i < defs.size(); ++i) {
        const Def& def = defs[i];
        const std::string id = prefix + std::to_string(i);
        if (!def.context.empty())
            out << "constexpr std::string_view " << id << "_context[] = {"
                << string_list(def.context) << "};\n";
        if (!def.one_of.empty())
            out << "constexpr std::string_view " << id << "_one_of[] = {" << string_list(def.one_of)
                << "};\n";
        if (!def.properties.empty()) {
            out << "constexpr Property " << id << "_properties[] = {\n";
            for (const auto& [name, type, required] : def.properties)
                out << "    {" << literal(name) << "sv, " << literal(type) << "sv, "
                    << (required ? "true" : "false") << "},\n";
            out << "};\n";
        }
    }
    out << "\nconstexpr Definition " << prefix << "definitions[] = {\n";
    for (std::size_t i = 0; i < defs.size(); ++i) {
        const Def& def = defs[i];
        const std::string id = prefix + std::to_string(i);
        out << "    {.name = " << literal(def.name) << "sv, .kind = " << kind_enum(def.kind);
        if (!def.context.empty()) out << ", .context = " << id << "_context";
        if (!def.properties.empty()) out << ", .properties = " << id << "_properties";
        if (!def.loose_key.empty()) out << ", .loose_key_type = " << literal(def.loose_key) << "sv";
        if (!def.loose_value.empty())
            out << ", .loose_value_type = " << literal(def.loose_value) << "sv";
        if (!def.item.empty()) out << ", .item_type = " << literal(def.item) << "sv";
        if (!def.one_of.empty()) out << ", .one_of = " << id << "_one_of";
        if (!def.constant.empty()) out << ", .constant = " << literal(def.constant) << "sv";
        if (def.non_empty) out << ", .require_non_empty = true";
        if (def.is_expression) out << ", .is_expression = true";
        if (def.ignore_case) out << ", .ignore_case = true";
        out << "},\n";
    }
    out << "};\n\nconstexpr std::string_view " << prefix << "version = " << literal(version)
        << "sv;\n\n";
}

}  // namespace

SchemaFile read_schema_file(const std::string& json_text) {
    SchemaFile file;
    try {
        const auto document = Json::parse(json_text);
        for (const auto& def : read_definitions(document, file.version))
            file.described[def.name] = describe(def);
    } catch (const std::exception& error) {
        file.error = error.what();
    }
    return file;
}

std::string generate_schema_tables(const std::string& workflow_json,
                                   const std::string& action_json) {
    std::string workflow_version, action_version;
    const auto workflow = read_definitions(Json::parse(workflow_json), workflow_version);
    const auto action = read_definitions(Json::parse(action_json), action_version);
    std::ostringstream out;
    out << "// GENERATED by sandgate-schema-gen from GitHub's template schemas "
           "(actions/languageservices\n"
           "// workflow-parser/src/workflow-v1.0.json and action-v1.0.json, MIT; see "
           "template_schema.hpp).\n"
           "// Do not edit: regenerate with\n"
           "//   build/tests/sandgate-schema-gen ../shared/corpora/workflow-schema > "
           "jobs/workflow/template_schema_tables.cpp\n"
           "// clang-format off\n"
           "#include \"jobs/workflow/template_schema.hpp\"\n\n"
           "namespace jobs::schema {\nnamespace {\n\nusing namespace "
           "std::string_view_literals;\n\n";
    generate(out, "k_workflow_", workflow, workflow_version);
    generate(out, "k_action_", action, action_version);
    out << "}  // namespace\n\n"
           "const Schema& workflow_schema() {\n    static const Schema schema{k_workflow_version, "
           "k_workflow_definitions};\n    return schema;\n}\n\n"
           "const Schema& action_schema() {\n    static const Schema schema{k_action_version, "
           "k_action_definitions};\n    return schema;\n}\n\n"
           "}  // namespace jobs::schema\n";
    return out.str();
}

}  // namespace tests
