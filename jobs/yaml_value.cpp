#include "jobs/yaml_value.hpp"

namespace jobs {
namespace {

ExprError at(const SourceMark& mark, ExprError error) {
    error.message = located(mark, error.message);
    return error;
}

}  // namespace

Value yaml_to_value(const YamlNode& node) {
    switch (node.kind) {
        case YamlNode::Kind::null: return Value();
        case YamlNode::Kind::sequence: {
            Array array;
            for (const auto& item : node.items) array.push_back(yaml_to_value(item));
            return Value(std::move(array));
        }
        case YamlNode::Kind::mapping: {
            Object object;
            for (const auto& entry : node.entries) object.set(entry.key, yaml_to_value(entry.value));
            return Value(std::move(object));
        }
        case YamlNode::Kind::scalar: break;
    }
    switch (node.scalar_type()) {
        case YamlNode::ScalarType::null: return Value();
        case YamlNode::ScalarType::boolean: return Value(node.as_bool());
        case YamlNode::ScalarType::number: return Value(node.as_number());
        case YamlNode::ScalarType::string: break;
    }
    return Value(node.text);
}

ExprExpected<Value> evaluate_yaml(const YamlNode& node, const EvalContext& context) {
    if (node.is_sequence()) {
        Array array;
        for (const auto& item : node.items) {
            auto value = evaluate_yaml(item, context);
            if (!value) return value;
            array.push_back(std::move(*value));
        }
        return Value(std::move(array));
    }
    if (node.is_mapping()) {
        Object object;
        for (const auto& entry : node.entries) {
            auto value = evaluate_yaml(entry.value, context);
            if (!value) return value;
            object.set(entry.key, std::move(*value));
        }
        return Value(std::move(object));
    }
    if (node.is_scalar() && node.scalar_type() == YamlNode::ScalarType::string && has_expression(node.text))
        return interpolate_value_at(node.text, node.mark, context);
    return yaml_to_value(node);
}

ExprExpected<std::string> interpolate_at(std::string_view text, const SourceMark& mark,
                                         const EvalContext& context) {
    if (!has_expression(text)) return std::string(text);
    auto result = interpolate(text, context);
    if (!result) return std::unexpected(at(mark, result.error()));
    return result;
}

ExprExpected<Value> interpolate_value_at(std::string_view text, const SourceMark& mark,
                                         const EvalContext& context) {
    auto result = interpolate_value(text, context);
    if (!result) return std::unexpected(at(mark, result.error()));
    return result;
}

ExprExpected<bool> condition_at(std::string_view text, const SourceMark& mark,
                                const EvalContext& context) {
    auto result = evaluate_condition(text, context);
    if (!result) return std::unexpected(at(mark, result.error()));
    return result;
}

}  // namespace jobs
