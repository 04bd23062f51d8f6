#include "jobs/yaml_tree.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

namespace jobs {
namespace {

using sandbox::ErrorKind;
using sandbox::fail;

constexpr std::size_t k_max_depth = 256;

SourceMark mark_of(const YAML::Mark& mark, std::string_view file) {
    if (mark.is_null()) return SourceMark{std::string(file), 0, 0};
    return SourceMark{std::string(file), mark.line + 1, mark.column + 1};
}

struct Converter {
    std::string_view file;
    std::string error;

    bool convert(const YAML::Node& node, YamlNode& out, std::size_t depth) {
        out.mark = mark_of(node.Mark(), file);
        if (depth > k_max_depth) return set_error(out.mark, "document nested too deeply");
        switch (node.Type()) {
            case YAML::NodeType::Undefined:
            case YAML::NodeType::Null:
                out.kind = YamlNode::Kind::null;
                return true;
            case YAML::NodeType::Scalar:
                out.kind = YamlNode::Kind::scalar;
                out.text = node.Scalar();
                out.plain = node.Tag() == "?";
                return true;
            case YAML::NodeType::Sequence:
                out.kind = YamlNode::Kind::sequence;
                for (const auto& item : node) {
                    out.items.emplace_back();
                    if (!convert(item, out.items.back(), depth + 1)) return false;
                }
                return true;
            case YAML::NodeType::Map:
                out.kind = YamlNode::Kind::mapping;
                return convert_map(node, out, depth);
        }
        return true;
    }

    bool convert_map(const YAML::Node& node, YamlNode& out, std::size_t depth) {
        for (const auto& pair : node) {
            const SourceMark key_mark = mark_of(pair.first.Mark(), file);
            if (!pair.first.IsScalar()) return set_error(key_mark, "a mapping key must be a string");
            const std::string key = pair.first.Scalar();
            if (out.find(key) != nullptr)
                return set_error(key_mark, "duplicate key '" + key + "'");
            out.entries.push_back(YamlEntry{key, key_mark, {}});
            if (!convert(pair.second, out.entries.back().value, depth + 1)) return false;
            // An empty value has no position of its own in yaml-cpp: use the key's.
            if (out.entries.back().value.mark.line == 0) out.entries.back().value.mark = key_mark;
        }
        return true;
    }

    bool set_error(const SourceMark& mark, std::string_view message) {
        error = located(mark, message);
        return false;
    }
};

bool is_null_text(const std::string& t) { return t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL"; }

bool is_bool_text(const std::string& t) {
    return t == "true" || t == "True" || t == "TRUE" || t == "false" || t == "False" ||
           t == "FALSE";
}

bool is_number_text(const std::string& t) {
    static const std::regex k_number(
        R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))");
    return std::regex_match(t, k_number);
}

}  // namespace

std::string to_string(const SourceMark& mark) {
    if (mark.line == 0) return mark.file;
    return mark.file + ":" + std::to_string(mark.line) + ":" + std::to_string(mark.column);
}

std::string located(const SourceMark& mark, std::string_view message) {
    return to_string(mark) + ": " + std::string(message);
}

const YamlNode* YamlNode::find(std::string_view key) const {
    for (const auto& entry : entries) {
        if (entry.key == key) return &entry.value;
    }
    return nullptr;
}

YamlNode::ScalarType YamlNode::scalar_type() const {
    if (kind == Kind::null) return ScalarType::null;
    if (kind != Kind::scalar || !plain) return ScalarType::string;
    if (is_null_text(text)) return ScalarType::null;
    if (is_bool_text(text)) return ScalarType::boolean;
    if (is_number_text(text)) return ScalarType::number;
    return ScalarType::string;
}

bool YamlNode::as_bool() const { return text == "true" || text == "True" || text == "TRUE"; }

double YamlNode::as_number() const {
    if (text.starts_with("0x")) return static_cast<double>(std::stoull(text.substr(2), nullptr, 16));
    if (text.starts_with("0o")) return static_cast<double>(std::stoull(text.substr(2), nullptr, 8));
    if (text.find("inf") != std::string::npos || text.find("Inf") != std::string::npos ||
        text.find("INF") != std::string::npos) {
        return text.starts_with("-") ? -std::numeric_limits<double>::infinity()
                                     : std::numeric_limits<double>::infinity();
    }
    if (text.find("nan") != std::string::npos || text.find("NaN") != std::string::npos ||
        text.find("NAN") != std::string::npos)
        return std::numeric_limits<double>::quiet_NaN();
    return std::strtod(text.c_str(), nullptr);
}

std::string_view YamlNode::type_name() const {
    switch (kind) {
        case Kind::mapping: return "mapping";
        case Kind::sequence: return "sequence";
        case Kind::null: return "null";
        case Kind::scalar: break;
    }
    switch (scalar_type()) {
        case ScalarType::boolean: return "boolean";
        case ScalarType::number: return "number";
        case ScalarType::null: return "null";
        case ScalarType::string: break;
    }
    return "string";
}

sandbox::Expected<YamlNode> parse_yaml(std::string_view text, std::string_view display_name) {
    std::vector<YAML::Node> documents;
    try {
        documents = YAML::LoadAll(std::string(text));
    } catch (const YAML::Exception& e) {
        return fail(ErrorKind::invalid_input,
                    located(mark_of(e.mark, display_name), e.msg.empty() ? "invalid YAML" : e.msg));
    }
    if (documents.size() > 1) {
        return fail(ErrorKind::invalid_input,
                    located(mark_of(documents[1].Mark(), display_name),
                            "a workflow file holds one YAML document"));
    }
    YamlNode root;
    root.mark = SourceMark{std::string(display_name), 1, 1};
    if (documents.empty()) return root;
    Converter converter{display_name, {}};
    try {
        if (!converter.convert(documents[0], root, 0))
            return fail(ErrorKind::invalid_input, converter.error);
    } catch (const YAML::Exception& e) {
        return fail(ErrorKind::invalid_input, located(mark_of(e.mark, display_name), e.msg));
    }
    return root;
}

sandbox::Expected<YamlNode> load_yaml_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(ErrorKind::invalid_input, path + ": cannot read the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return parse_yaml(buffer.str(), path);
}

}  // namespace jobs
