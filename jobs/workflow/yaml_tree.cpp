// The YAML reader: libyaml's event parser feeding an explicit stack (no recursion, whatever
// the nesting), with GitHub's reader rules and bounds (see yaml_tree.hpp).
#include "jobs/workflow/yaml_tree.hpp"

#include <yaml.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "jobs/workflow/yaml_scalar.hpp"

namespace jobs {
namespace {

using namespace yaml_detail;
using common::ErrorKind;
using common::fail;

constexpr std::string_view k_tag_str = "tag:yaml.org,2002:str";
constexpr std::string_view k_tag_int = "tag:yaml.org,2002:int";
constexpr std::string_view k_tag_float = "tag:yaml.org,2002:float";
constexpr std::string_view k_tag_bool = "tag:yaml.org,2002:bool";
constexpr std::string_view k_tag_null = "tag:yaml.org,2002:null";

std::string in_quotes(std::string_view text) {
    return "'" + one_line(text) + "'";
}

}  // namespace

const YamlNode* YamlNode::find(std::string_view key) const {
    for (const auto& entry : entries) {
        if (entry.key == key) return &entry.value;
    }
    return nullptr;
}

YamlNode::ScalarType YamlNode::scalar_type() const {
    if (kind == Kind::null) return ScalarType::null;
    if (kind != Kind::scalar || !plain) return ScalarType::string;
    return resolve_plain_scalar(text);
}

bool YamlNode::as_bool() const {
    return is_true_text(text);
}

double YamlNode::as_number() const {
    double value = 0;
    resolve_plain_scalar(text, &value);
    return value;
}

std::string_view YamlNode::type_name() const {
    switch (kind) {
        case Kind::mapping:
            return "mapping";
        case Kind::sequence:
            return "sequence";
        case Kind::null:
            return "null";
        case Kind::scalar:
            break;
    }
    switch (scalar_type()) {
        case ScalarType::boolean:
            return "boolean";
        case ScalarType::number:
            return "number";
        case ScalarType::null:
            return "null";
        case ScalarType::string:
            break;
    }
    return "string";
}

namespace {

// libyaml's parser and event, released on every path.
struct Parser {
    yaml_parser_t parser{};
    Parser() { yaml_parser_initialize(&parser); }
    ~Parser() { yaml_parser_delete(&parser); }
    Parser(const Parser&) = delete;
    Parser& operator=(const Parser&) = delete;
};

struct Event {
    yaml_event_t event{};
    bool held = false;
    ~Event() { reset(); }
    void reset() {
        if (held) yaml_event_delete(&event);
        held = false;
    }
};

std::string_view view(const yaml_char_t* text) {
    return text == nullptr ? std::string_view()
                           : std::string_view(reinterpret_cast<const char*>(text));
}

// An anchored node, kept for its aliases with what replaying it costs.
struct Anchored {
    YamlNode node;
    std::size_t events = 0;
    std::size_t bytes = 0;
};

// A collection being read.
struct Frame {
    YamlNode node;
    std::string anchor;
    std::size_t events_at_start = 0;
    std::size_t bytes_at_start = 0;
    bool have_key = false;
    std::string key;
    SourceMark key_mark;
    std::unordered_set<std::string> keys;
};

class Builder {
public:
    explicit Builder(std::string_view file) : m_file(file) {}

    common::Expected<YamlNode> run(std::string_view text) {
        Parser parser;
        yaml_parser_set_input_string(
            &parser.parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
        Event event;
        int documents = 0;
        for (;;) {
            event.reset();
            if (yaml_parser_parse(&parser.parser, &event.event) == 0)
                return syntax_error(parser.parser);
            event.held = true;
            const yaml_event_t& e = event.event;
            if (++m_events > k_yaml_max_events)
                return error(mark(e.start_mark), "Maximum YAML nodes exceeded");
            switch (e.type) {
                case YAML_STREAM_END_EVENT:
                    return finish();
                case YAML_DOCUMENT_START_EVENT:
                    if (++documents > 1)
                        return error(mark(e.start_mark), "a workflow file holds one YAML document");
                    break;
                case YAML_SCALAR_EVENT:
                    if (!scalar(e)) return failed();
                    break;
                case YAML_ALIAS_EVENT:
                    if (!alias(e)) return failed();
                    break;
                case YAML_SEQUENCE_START_EVENT:
                    if (!open(e, YamlNode::Kind::sequence, view(e.data.sequence_start.anchor)))
                        return failed();
                    break;
                case YAML_MAPPING_START_EVENT:
                    if (!open(e, YamlNode::Kind::mapping, view(e.data.mapping_start.anchor)))
                        return failed();
                    break;
                case YAML_SEQUENCE_END_EVENT:
                case YAML_MAPPING_END_EVENT:
                    if (!close()) return failed();
                    break;
                default:
                    break;
            }
        }
    }

private:
    SourceMark mark(const yaml_mark_t& m) const {
        return SourceMark{std::string(m_file), static_cast<int>(m.line) + 1,
                          static_cast<int>(m.column) + 1};
    }

    std::unexpected<common::Error> error(const SourceMark& where, std::string_view message) const {
        return fail(ErrorKind::invalid_input, located(where, message));
    }
    bool set_error(const SourceMark& where, std::string_view message) {
        m_error = located(where, message);
        return false;
    }
    std::unexpected<common::Error> failed() const {
        return fail(ErrorKind::invalid_input, m_error);
    }

    std::unexpected<common::Error> syntax_error(const yaml_parser_t& parser) const {
        std::string message = parser.problem != nullptr ? parser.problem : "invalid YAML";
        if (parser.context != nullptr) message += std::string(" ") + parser.context;
        SourceMark where = mark(parser.problem_mark);
        return error(where, message);
    }

    common::Expected<YamlNode> finish() {
        if (!m_root) {
            YamlNode root;
            root.mark = SourceMark{std::string(m_file), 1, 1};
            return root;
        }
        return std::move(*m_root);
    }

    bool count_bytes(std::size_t bytes, const SourceMark& where) {
        m_bytes += bytes;
        if (m_bytes > k_yaml_max_bytes) return set_error(where, "Maximum object size exceeded");
        return true;
    }

    // YamlDotNet's name of a scalar style (GitHub's messages name it).
    static std::string_view style_name(yaml_scalar_style_t style) {
        switch (style) {
            case YAML_SINGLE_QUOTED_SCALAR_STYLE:
                return "SingleQuoted";
            case YAML_DOUBLE_QUOTED_SCALAR_STYLE:
                return "DoubleQuoted";
            case YAML_LITERAL_SCALAR_STYLE:
                return "Literal";
            case YAML_FOLDED_SCALAR_STYLE:
                return "Folded";
            case YAML_PLAIN_SCALAR_STYLE:
                return "Plain";
            default:
                return "Any";
        }
    }

    // GitHub's rules for a scalar's tag: only the core tags, a non-string tag only on a plain
    // scalar, and the value valid for it.
    bool scalar_node(const yaml_event_t& e, YamlNode& node) {
        const auto& s = e.data.scalar;
        node.kind = YamlNode::Kind::scalar;
        node.mark = mark(e.start_mark);
        node.text.assign(reinterpret_cast<const char*>(s.value), s.length);
        node.plain = s.style == YAML_PLAIN_SCALAR_STYLE;
        const std::string_view tag = view(s.tag);
        if (!tag.empty()) {
            if (tag == k_tag_str || tag == "!") {
                node.plain = false;  // `!` is YAML's non-specific tag: a string
            } else if (!node.plain) {
                return set_error(
                    node.mark, "The scalar style '" + std::string(style_name(s.style)) +
                                   "' on line " + std::to_string(node.mark.line) + " and column " +
                                   std::to_string(node.mark.column) +
                                   " is not valid with the tag '" + std::string(tag) + "'");
            } else {
                if (tag != k_tag_int && tag != k_tag_float && tag != k_tag_bool &&
                    tag != k_tag_null)
                    return set_error(node.mark, "Unexpected tag '" + std::string(tag) + "'");
                double number = 0;
                bool range_error = false;
                const bool valid =
                    (tag == k_tag_int && match_integer(node.text, number, range_error)) ||
                    (tag == k_tag_float && match_float(node.text, number)) ||
                    (tag == k_tag_bool && (is_true_text(node.text) || is_false_text(node.text))) ||
                    (tag == k_tag_null && is_null_text(node.text));
                if (!valid) return invalid_for_tag(node, tag);
            }
        }
        if (node.plain) {
            bool out_of_range = false;
            if (resolve_plain_scalar(node.text, nullptr, &out_of_range) ==
                    YamlNode::ScalarType::number &&
                out_of_range)
                return invalid_for_tag(node, k_tag_int);
            // The text stays until the node is placed: a key keeps it (`null: x` is the key
            // "null").
            if (is_null_text(node.text)) node.kind = YamlNode::Kind::null;
        }
        return count_bytes(node.text.size(), node.mark);
    }

    bool invalid_for_tag(const YamlNode& node, std::string_view tag) {
        return set_error(node.mark, "The value " + in_quotes(node.text) + " on line " +
                                        std::to_string(node.mark.line) + " and column " +
                                        std::to_string(node.mark.column) +
                                        " is invalid for the type '" + std::string(tag) + "'");
    }

    bool scalar(const yaml_event_t& e) {
        YamlNode node;
        if (!scalar_node(e, node)) return false;
        const std::string_view anchor = view(e.data.scalar.anchor);
        if (!anchor.empty()) m_anchors[std::string(anchor)] = Anchored{node, 1, node.text.size()};
        return deliver(std::move(node));
    }

    bool alias(const yaml_event_t& e) {
        const SourceMark where = mark(e.start_mark);
        const std::string name(view(e.data.alias.anchor));
        const auto found = m_anchors.find(name);
        if (found == m_anchors.end()) {
            for (const auto& frame : m_stack) {
                if (frame.anchor == name)
                    return set_error(where, "The alias '*" + one_line(name) +
                                                "' refers to the node that holds it");
            }
            return set_error(where, "Unknown anchor '" + one_line(name) + "'");
        }
        // Replaying the anchored node costs its events and its bytes again.
        m_events += found->second.events - 1;
        if (m_events > k_yaml_max_events) return set_error(where, "Maximum YAML nodes exceeded");
        if (!count_bytes(found->second.bytes, where)) return false;
        if (m_stack.size() + depth_of(found->second.node) >
            static_cast<std::size_t>(k_yaml_max_depth))
            return set_error(where, "Maximum object depth exceeded");
        return deliver(found->second.node);
    }

    static std::size_t depth_of(const YamlNode& node) {
        // Iterative: anchored nodes are at most k_yaml_max_depth deep, but stay safe anyway.
        std::size_t deepest = 0;
        std::vector<std::pair<const YamlNode*, std::size_t>> pending{{&node, 0}};
        while (!pending.empty()) {
            auto [current, depth] = pending.back();
            pending.pop_back();
            if (!current->is_mapping() && !current->is_sequence()) continue;
            deepest = std::max(deepest, depth + 1);
            for (const auto& item : current->items) pending.emplace_back(&item, depth + 1);
            for (const auto& entry : current->entries)
                pending.emplace_back(&entry.value, depth + 1);
        }
        return deepest;
    }

    bool open(const yaml_event_t& e, YamlNode::Kind kind, std::string_view anchor) {
        const SourceMark where = mark(e.start_mark);
        if (m_stack.size() >= static_cast<std::size_t>(k_yaml_max_depth))
            return set_error(where, "Maximum object depth exceeded");
        Frame frame;
        frame.node.kind = kind;
        frame.node.mark = where;
        frame.anchor = std::string(anchor);
        frame.events_at_start = m_events;
        frame.bytes_at_start = m_bytes;
        m_stack.push_back(std::move(frame));
        return true;
    }

    bool close() {
        Frame frame = std::move(m_stack.back());
        m_stack.pop_back();
        if (!frame.anchor.empty()) {
            m_anchors[frame.anchor] = Anchored{frame.node, m_events + 1 - frame.events_at_start,
                                               m_bytes - frame.bytes_at_start};
        }
        return deliver(std::move(frame.node));
    }

    // Small mappings are scanned; from k_scan_limit keys on, a set answers in O(1).
    static bool is_duplicate(Frame& frame, const std::string& key) {
        constexpr std::size_t k_scan_limit = 16;
        auto& entries = frame.node.entries;
        if (entries.size() < k_scan_limit) {
            for (const auto& entry : entries) {
                if (entry.key == key) return true;
            }
            return false;
        }
        if (frame.keys.empty()) {
            for (const auto& entry : entries) frame.keys.insert(entry.key);
        }
        return !frame.keys.insert(key).second;
    }

    bool deliver(YamlNode node) {
        Frame* top = m_stack.empty() ? nullptr : &m_stack.back();
        const bool is_key = top != nullptr && top->node.is_mapping() && !top->have_key;
        if (is_key) {
            if (node.is_mapping() || node.is_sequence())
                return set_error(node.mark, "A mapping key must be a string");
            if (is_duplicate(*top, node.text))
                return set_error(node.mark, in_quotes(node.text) + " is already defined");
            top->have_key = true;
            top->key = std::move(node.text);
            top->key_mark = std::move(node.mark);
            return true;
        }
        // An empty value keeps libyaml's position for it, just after the `:` (GitHub's too).
        if (node.is_null()) node.text.clear();
        if (top == nullptr) {
            m_root = std::move(node);
        } else if (top->node.is_sequence()) {
            top->node.items.push_back(std::move(node));
        } else {
            top->have_key = false;
            top->node.entries.push_back(
                YamlEntry{std::move(top->key), std::move(top->key_mark), std::move(node)});
        }
        return true;
    }

    std::string_view m_file;
    std::string m_error;
    std::vector<Frame> m_stack;
    std::optional<YamlNode> m_root;
    std::unordered_map<std::string, Anchored> m_anchors;
    std::size_t m_events = 0;
    std::size_t m_bytes = 0;
};

// Characters as GitHub counts them (UTF-16 code units): every byte that does not continue a
// UTF-8 sequence, and one more for each four-byte sequence.
std::size_t utf16_length(std::string_view text) {
    std::size_t count = 0;
    for (char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if ((byte & 0xC0) != 0x80) ++count;
        if (byte >= 0xF0) ++count;
    }
    return count;
}

}  // namespace

common::Expected<YamlNode> parse_yaml(std::string_view text, std::string_view display_name) {
    if (text.size() > k_yaml_max_chars && utf16_length(text) > k_yaml_max_chars) {
        return fail(ErrorKind::invalid_input,
                    located(SourceMark{std::string(display_name), 0, 0},
                            "The maximum file size of " + std::to_string(k_yaml_max_chars) +
                                " characters has been exceeded"));
    }
    return Builder(display_name).run(text);
}

common::Expected<YamlNode> load_yaml_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(ErrorKind::invalid_input, one_line(path) + ": cannot read the file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return parse_yaml(buffer.str(), path);
}

}  // namespace jobs
