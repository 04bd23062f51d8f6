#pragma once
// strategy.matrix, expanded exactly as GitHub does:
//  1. the cartesian product of the vectors (keys other than include/exclude), in key order;
//  2. exclude: drop every combination that matches all of an entry's key/values;
//  3. include: each entry extends every combination whose ORIGINAL vector values it does not
//     contradict (values added by earlier includes may be overwritten); an entry that extends
//     none is appended as a combination of its own.
// Matrices computed by expressions are evaluated first (evaluate_matrix): the whole matrix,
// a vector, an include/exclude list or one vector item may be `${{ }}`; an item that
// evaluates to an array is spliced into its vector (act's merge behaviour).

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "jobs/expr/expr.hpp"
#include "jobs/expr/value.hpp"
#include "jobs/workflow/yaml_tree.hpp"

namespace jobs {

inline constexpr std::size_t k_max_matrix_combinations = 256;

// The YAML matrix evaluated to an Object. Errors carry file:line:col.
ExprExpected<Value> evaluate_matrix(const YamlNode& matrix, const EvalContext& context);

// Expands an evaluated matrix Object into its combinations (each an Object). Errors
// (invalid_input): a vector that is not an array or is empty, include/exclude that are not
// arrays of objects, more than k_max_matrix_combinations combinations, or none at all.
common::Expected<std::vector<Value>> expand_matrix(const Value& matrix);

// act's --matrix KEY:VALUE: keeps the combinations whose value for each filtered key (as
// text) is one of the values given for it; keys a combination lacks do not filter it.
std::vector<Value> filter_matrix(std::vector<Value> combinations,
                                 const std::vector<std::pair<std::string, std::string>>& filter);

}  // namespace jobs
