#include "jobs/workflow/yaml_value.hpp"

#include "jobs/workflow/template_reader.hpp"

namespace jobs {
namespace {

ExprError at(const SourceMark& mark, ExprError error) {
    error.message = located(mark, error.message);
    return error;
}

}  // namespace

ExprExpected<void> evaluate_entry(const YamlEntry& entry, const EvalContext& context, Object& out) {
    // `${{ insert }}`: the value, a mapping once evaluated, is spliced in (GitHub's
    // TemplateEvaluator); a key holding an expression is evaluated to a string.
    if (has_expression(entry.key)) {
        if (is_insert_directive(entry.key)) {
            auto value = evaluate_yaml(entry.value, context);
            if (!value) return std::unexpected(value.error());
            if (!value->is_object())
                return std::unexpected(
                    ExprError{ExprError::Phase::evaluation,
                              located(entry.key_mark, "${{ insert }} needs a mapping, not " +
                                                          std::string(to_string(value->kind())))});
            for (const auto& [key, item] : value->as_object()) out.set(key, item);
            return {};
        }
        auto key = interpolate_at(entry.key, entry.key_mark, context);
        if (!key) return std::unexpected(key.error());
        auto value = evaluate_yaml(entry.value, context);
        if (!value) return std::unexpected(value.error());
        out.set(std::move(*key), std::move(*value));
        return {};
    }
    auto value = evaluate_yaml(entry.value, context);
    if (!value) return std::unexpected(value.error());
    out.set(entry.key, std::move(*value));
    return {};
}

Value yaml_to_value(const YamlNode& node) {
    switch (node.kind) {
        case YamlNode::Kind::null:
            return Value();
        case YamlNode::Kind::sequence: {
            Array array;
            for (const auto& item : node.items) array.push_back(yaml_to_value(item));
            return Value(std::move(array));
        }
        case YamlNode::Kind::mapping: {
            Object object;
            for (const auto& entry : node.entries)
                object.set(entry.key, yaml_to_value(entry.value));
            return Value(std::move(object));
        }
        case YamlNode::Kind::scalar:
            break;
    }
    switch (node.scalar_type()) {
        case YamlNode::ScalarType::null:
            return Value();
        case YamlNode::ScalarType::boolean:
            return Value(node.as_bool());
        case YamlNode::ScalarType::number:
            return Value(node.as_number());
        case YamlNode::ScalarType::string:
            break;
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
            SANDGATE_CHECK(evaluate_entry(entry, context, object));
        }
        return Value(std::move(object));
    }
    if (node.is_scalar() && node.scalar_type() == YamlNode::ScalarType::string &&
        has_expression(node.text))
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
