// The public entry points: one expression, an `if:` condition, and `${{ }}` templates.
#include "jobs/expr/expr.hpp"

#include <optional>

namespace jobs {

std::string_view to_string(ExprError::Phase phase) {
    switch (phase) {
        case ExprError::Phase::lexing:
            return "lexing";
        case ExprError::Phase::parsing:
            return "parsing";
        case ExprError::Phase::evaluation:
            return "evaluation";
    }
    return "evaluation";
}

std::vector<std::string> context_names(const EvalContext& context) {
    std::vector<std::string> names;
    names.reserve(context.contexts.size());
    for (const auto& [name, value] : context.contexts) names.push_back(name);
    return names;
}

ExprExpected<Value> evaluate(std::string_view expression, const EvalContext& context) {
    auto parsed = parse(expression, context.contexts, context.functions);
    if (!parsed) return std::unexpected(parsed.error());
    return parsed->evaluate(context);
}

namespace {

// One piece of a template: literal text, or the inside of a `${{ }}`.
struct Segment {
    bool is_expression = false;
    std::string_view text;
};

// Splits `text` at its `${{ ... }}`. The closing `}}` is the first one outside a 'string'
// literal, so `${{ format('}}') }}` works.
ExprExpected<std::vector<Segment>> split_template(std::string_view text) {
    std::vector<Segment> segments;
    std::size_t index = 0;
    while (index < text.size()) {
        const auto open = text.find("${{", index);
        if (open == std::string_view::npos) {
            segments.push_back({false, text.substr(index)});
            break;
        }
        if (open > index) segments.push_back({false, text.substr(index, open - index)});
        std::size_t close = std::string_view::npos;
        bool in_string = false;
        for (std::size_t i = open + 3; i + 1 < text.size(); ++i) {
            if (text[i] == '\'') {
                in_string = !in_string;  // a '' escape toggles twice
            } else if (!in_string && text[i] == '}' && text[i + 1] == '}') {
                close = i;
                break;
            }
        }
        if (close == std::string_view::npos) {
            return std::unexpected(ExprError{ExprError::Phase::parsing,
                                             "The expression is not closed. An unescaped ${{ "
                                             "sequence was found, but the closing }} "
                                             "sequence was not found. Located at position " +
                                                 std::to_string(open + 1) +
                                                 " within: " + std::string(text)});
        }
        segments.push_back({true, text.substr(open + 3, close - open - 3)});
        index = close + 2;
    }
    return segments;
}

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

// The inside of the `${{ }}` when the trimmed text is exactly one; nullopt otherwise.
std::optional<std::string_view> sole_expression(const std::vector<Segment>& segments) {
    std::optional<std::string_view> found;
    for (const auto& segment : segments) {
        if (segment.is_expression) {
            if (found) return std::nullopt;
            found = segment.text;
        } else if (!trim(segment.text).empty()) {
            return std::nullopt;
        }
    }
    return found;
}

}  // namespace

bool has_expression(std::string_view text) {
    return text.find("${{") != std::string_view::npos;
}

ExprExpected<std::string> interpolate(std::string_view text, const EvalContext& context) {
    auto segments = split_template(text);
    if (!segments) return std::unexpected(segments.error());
    std::string out;
    out.reserve(text.size());
    for (const auto& segment : *segments) {
        if (!segment.is_expression) {
            out += segment.text;
            continue;
        }
        auto value = evaluate(segment.text, context);
        if (!value) return std::unexpected(value.error());
        out += value->to_display_string();
    }
    return out;
}

ExprExpected<Value> interpolate_value(std::string_view text, const EvalContext& context) {
    auto segments = split_template(text);
    if (!segments) return std::unexpected(segments.error());
    if (auto sole = sole_expression(*segments)) return evaluate(*sole, context);
    auto joined = interpolate(text, context);
    if (!joined) return std::unexpected(joined.error());
    return Value(std::move(*joined));
}

ExprExpected<void> check_template(std::string_view text, std::span<const std::string> names,
                                  FunctionSet functions) {
    auto segments = split_template(text);
    if (!segments) return std::unexpected(segments.error());
    for (const auto& segment : *segments) {
        if (!segment.is_expression) continue;
        if (auto parsed = parse(segment.text, names, functions); !parsed)
            return std::unexpected(parsed.error());
    }
    return {};
}

ExprExpected<void> check_condition(std::string_view if_text, std::span<const std::string> names,
                                   FunctionSet functions) {
    functions = functions | FunctionSet::status;
    const std::string_view text = trim(if_text);
    if (has_expression(text)) return check_template(text, names, functions);
    if (auto parsed = parse(text, names, functions); !parsed)
        return std::unexpected(parsed.error());
    return {};
}

ExprExpected<bool> evaluate_condition(std::string_view if_text, const EvalContext& context) {
    // Status functions are always allowed in a condition. Evaluation does not consult the
    // function set (parse checked it), so the caller's context serves as is.
    const FunctionSet functions = context.functions | FunctionSet::status;
    const EvalContext& with_status = context;
    std::string_view expression = trim(if_text);
    std::string interpolated;
    if (has_expression(expression)) {
        auto segments = split_template(expression);
        if (!segments) return std::unexpected(segments.error());
        if (auto sole = sole_expression(*segments)) {
            expression = *sole;
        } else {
            // Literal text around `${{ }}`: GitHub evaluates the template to a string, and a
            // non-empty string is true (after the implicit success()).
            EvalContext widened = context;
            widened.functions = functions;
            auto text = interpolate(expression, widened);
            if (!text) return std::unexpected(text.error());
            return with_status.status == RunStatus::success && !text->empty();
        }
    }
    if (trim(expression).empty()) return with_status.status == RunStatus::success;
    auto parsed = parse(expression, with_status.contexts, functions);
    if (!parsed) return std::unexpected(parsed.error());
    if (!parsed->uses_status_function() && with_status.status != RunStatus::success) return false;
    auto value = parsed->evaluate(with_status);
    if (!value) return std::unexpected(value.error());
    return value->truthy();
}

}  // namespace jobs
