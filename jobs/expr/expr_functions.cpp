#include "jobs/expr/expr_functions.hpp"

#include <cmath>
#include <string>
#include <utility>

namespace jobs::expr_detail {
namespace {

ExprExpected<Value> evaluation_error(std::string message) {
    return std::unexpected(ExprError{ExprError::Phase::evaluation, std::move(message)});
}

// Brings two operands to a common kind the way GitHub does: Null and Boolean become
// Numbers, a Number against a String makes the String a Number; arrays and objects stay.
std::pair<Value, Value> coerce(const Value& left, const Value& right) {
    if (left.kind() == right.kind()) return {left, right};
    if (left.is_number() && right.is_string()) return {left, Value(right.to_number())};
    if (left.is_string() && right.is_number()) return {Value(left.to_number()), right};
    if (left.is_null() || left.is_boolean()) return coerce(Value(left.to_number()), right);
    if (right.is_null() || right.is_boolean()) return coerce(left, Value(right.to_number()));
    return {left, right};
}

// -1, 0, 1 for ordered kinds; nullopt when the pair is unordered (kinds differ, NaN,
// arrays/objects).
std::optional<int> order(const Value& left, const Value& right) {
    const auto [l, r] = coerce(left, right);
    if (l.kind() != r.kind()) return std::nullopt;
    switch (l.kind()) {
        case Kind::number: {
            const double a = l.as_number();
            const double b = r.as_number();
            if (std::isnan(a) || std::isnan(b)) return std::nullopt;
            return a < b ? -1 : a > b ? 1 : 0;
        }
        case Kind::string: {
            const int c = fold_case(l.as_string()).compare(fold_case(r.as_string()));
            return c < 0 ? -1 : c > 0 ? 1 : 0;
        }
        case Kind::boolean:
            return static_cast<int>(l.as_boolean()) - static_cast<int>(r.as_boolean());
        default:
            return std::nullopt;
    }
}

ExprExpected<Value> format(std::span<const Value> args) {
    const std::string pattern = args[0].to_display_string();
    const auto invalid = [&] {
        return evaluation_error("The following format string is invalid: " + pattern);
    };
    std::string out;
    std::size_t index = 0;
    while (index < pattern.size()) {
        const auto left = pattern.find('{', index);
        const auto right = pattern.find('}', index);
        if (left != std::string::npos && (right == std::string::npos || right > left)) {
            if (left + 1 < pattern.size() && pattern[left + 1] == '{') {  // {{
                out.append(pattern, index, left - index + 1);
                index = left + 2;
                continue;
            }
            std::size_t digits = 0;
            while (left + 1 + digits < pattern.size() &&
                   std::isdigit(static_cast<unsigned char>(pattern[left + 1 + digits]))) {
                ++digits;
            }
            // {N...}: GitHub reads the leading digits and skips to the right brace.
            if (digits == 0 || right == std::string::npos) return invalid();
            std::size_t argument = 0;
            for (std::size_t i = 0; i < digits && argument < 100000; ++i) {
                argument = argument * 10 + static_cast<std::size_t>(pattern[left + 1 + i] - '0');
            }
            if (argument + 1 >= args.size()) {
                return evaluation_error(
                    "The following format string references more arguments than were supplied: " +
                    pattern);
            }
            out.append(pattern, index, left - index);
            out += args[argument + 1].to_display_string();
            index = right + 1;
        } else if (right != std::string::npos) {
            if (right + 1 >= pattern.size() || pattern[right + 1] != '}') return invalid();
            out.append(pattern, index, right - index + 1);  // }}
            index = right + 2;
        } else {
            out.append(pattern, index);
            break;
        }
    }
    return Value(std::move(out));
}

Value join(std::span<const Value> args) {
    if (args[0].is_primitive()) return Value(args[0].to_display_string());
    if (!args[0].is_array()) return Value("");
    const std::string separator =
        args.size() > 1 && args[1].is_primitive() ? args[1].to_display_string() : std::string(",");
    std::string out;
    bool first = true;
    for (const auto& item : args[0].as_array()) {
        if (!first) out += separator;
        first = false;
        out += item.to_display_string();
    }
    return Value(std::move(out));
}

Value contains(const Value& haystack, const Value& needle) {
    if (haystack.is_primitive()) {
        if (!needle.is_primitive()) return Value(false);
        return Value(
            fold_case(haystack.to_display_string()).find(fold_case(needle.to_display_string())) !=
            std::string::npos);
    }
    if (haystack.is_array()) {
        for (const auto& item : haystack.as_array()) {
            if (loose_equals(needle, item)) return Value(true);
        }
    }
    return Value(false);
}

Value affix(const Value& text, const Value& affix_value, Function which) {
    if (!text.is_primitive() || !affix_value.is_primitive()) return Value(false);
    const std::string haystack = fold_case(text.to_display_string());
    const std::string needle = fold_case(affix_value.to_display_string());
    return Value(which == Function::starts_with ? haystack.starts_with(needle)
                                                : haystack.ends_with(needle));
}

ExprExpected<Value> from_json(const Value& input) {
    const std::string text = input.to_display_string();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        return evaluation_error("Error parsing fromJson: empty input");
    }
    auto parsed = parse_json(text);
    if (!parsed) return evaluation_error("Error parsing fromJson: " + parsed.error().message);
    return std::move(*parsed);
}

ExprExpected<Value> case_function(std::span<const Value> args) {
    for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
        if (!args[i].is_boolean())
            return evaluation_error("case predicate must evaluate to a boolean value");
        if (args[i].as_boolean()) return args[i + 1];
    }
    return args.back();
}

ExprExpected<Value> hash_files_function(std::span<const Value> args, const EvalContext& context) {
    std::vector<std::string> patterns;
    for (const auto& arg : args) patterns.push_back(arg.to_display_string());
    common::Expected<std::string> digest = common::fail(common::ErrorKind::unavailable, "");
    if (context.hash_files) {
        digest = context.hash_files(patterns);
    } else if (context.workspace) {
        digest =
            hash_files(*context.workspace, patterns, HashLimits{context.deadline, context.cancel});
    } else {
        return evaluation_error("hashFiles is not available here: no workspace");
    }
    if (!digest) return evaluation_error("hashFiles failed: " + digest.error().message);
    return Value(std::move(*digest));
}

}  // namespace

bool loose_equals(const Value& left, const Value& right) {
    const auto [l, r] = coerce(left, right);
    if (l.kind() != r.kind()) return false;
    switch (l.kind()) {
        case Kind::null:
            return true;
        case Kind::number:
            return l.as_number() == r.as_number();  // NaN != NaN
        case Kind::string:
            return equals_ignore_case(l.as_string(), r.as_string());
        case Kind::boolean:
            return l.as_boolean() == r.as_boolean();
        case Kind::array:
        case Kind::object:
            return l.same_container(r);
    }
    return false;
}

bool greater_than(const Value& left, const Value& right) {
    const auto result = order(left, right);
    return result && *result > 0;
}

bool less_than(const Value& left, const Value& right) {
    const auto result = order(left, right);
    return result && *result < 0;
}

// success(ids...) is true when every named needed job succeeded, failure(ids...) when one of
// them failed: their `needs.<id>.result`.
Value needs_results(std::span<const Value> args, const EvalContext& context,
                    std::string_view wanted) {
    const Value* needs = context.contexts.find("needs");
    const bool all = wanted == "success";
    for (const auto& arg : args) {
        const Value* job = needs != nullptr ? needs->get(arg.to_display_string()) : nullptr;
        const Value* result = job != nullptr ? job->get("result") : nullptr;
        const bool is = result != nullptr && result->is_string() && result->as_string() == wanted;
        if (all && !is) return Value(false);
        if (!all && is) return Value(true);
    }
    return Value(all);
}

ExprExpected<Value> call_function(Function function, std::span<const Value> args,
                                  const EvalContext& context) {
    switch (function) {
        case Function::contains:
            return contains(args[0], args[1]);
        case Function::starts_with:
        case Function::ends_with:
            return affix(args[0], args[1], function);
        case Function::format:
            return format(args);
        case Function::join:
            return join(args);
        case Function::to_json:
            return Value(to_json(args[0], JsonStyle::pretty));
        case Function::from_json:
            return from_json(args[0]);
        case Function::case_:
            return case_function(args);
        case Function::hash_files:
            return hash_files_function(args, context);
        case Function::success:
            if (!args.empty()) return needs_results(args, context, "success");
            return Value(context.status == RunStatus::success);
        case Function::failure:
            if (!args.empty()) return needs_results(args, context, "failure");
            return Value(context.status == RunStatus::failure);
        case Function::always:
            return Value(true);
        case Function::cancelled:
            return Value(context.status == RunStatus::cancelled);
    }
    return evaluation_error("unknown function");
}

}  // namespace jobs::expr_detail
