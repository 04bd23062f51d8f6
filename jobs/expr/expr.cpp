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
    auto parsed = SANDGATE_TRY(parse(expression, context.contexts, context.functions));
    return parsed.evaluate(context);
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
    auto segments = SANDGATE_TRY(split_template(text));
    std::string out;
    out.reserve(text.size());
    for (const auto& segment : segments) {
        if (!segment.is_expression) {
            out += segment.text;
            continue;
        }
        auto value = SANDGATE_TRY(evaluate(segment.text, context));
        out += value.to_display_string();
    }
    return out;
}

ExprExpected<Value> interpolate_value(std::string_view text, const EvalContext& context) {
    auto segments = SANDGATE_TRY(split_template(text));
    if (auto sole = sole_expression(segments)) return evaluate(*sole, context);
    auto joined = SANDGATE_TRY(interpolate(text, context));
    return Value(std::move(joined));
}

ExprExpected<void> check_template(std::string_view text, std::span<const std::string> names,
                                  FunctionSet functions) {
    auto segments = SANDGATE_TRY(split_template(text));
    for (const auto& segment : segments) {
        if (!segment.is_expression) continue;
        (void)SANDGATE_TRY(parse(segment.text, names, functions));
    }
    return {};
}

ExprExpected<void> check_condition(std::string_view if_text, std::span<const std::string> names,
                                   FunctionSet functions) {
    functions = functions | FunctionSet::status;
    const std::string_view text = trim(if_text);
    if (has_expression(text)) return check_template(text, names, functions);
    (void)SANDGATE_TRY(parse(text, names, functions));
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
        auto segments = SANDGATE_TRY(split_template(expression));
        if (auto sole = sole_expression(segments)) {
            expression = *sole;
        } else {
            // Literal text around `${{ }}`: GitHub evaluates the template to a string, and a
            // non-empty string is true (after the implicit success()).
            EvalContext widened = context;
            widened.functions = functions;
            auto text = SANDGATE_TRY(interpolate(expression, widened));
            return with_status.status == RunStatus::success && !text.empty();
        }
    }
    if (trim(expression).empty()) return with_status.status == RunStatus::success;
    auto parsed = SANDGATE_TRY(parse(expression, with_status.contexts, functions));
    if (!parsed.uses_status_function() && with_status.status != RunStatus::success) return false;
    auto value = SANDGATE_TRY(parsed.evaluate(with_status));
    return value.truthy();
}

}  // namespace jobs
