#pragma once
// Internal: GitHub's comparison rules and the built-in functions.

#include <span>

#include "jobs/expr/expr.hpp"
#include "jobs/expr/expr_parser.hpp"

namespace jobs::expr_detail {

// `==`: JavaScript-like abstract equality (booleans and null become numbers, a number
// against a string compares numbers), strings case-insensitively, NaN equal to nothing,
// arrays and objects by identity.
bool loose_equals(const Value& left, const Value& right);
bool greater_than(const Value& left, const Value& right);
bool less_than(const Value& left, const Value& right);

// Calls a validated function with evaluated arguments.
ExprExpected<Value> call_function(Function function, std::span<const Value> args,
                                  const EvalContext& context);

}  // namespace jobs::expr_detail
