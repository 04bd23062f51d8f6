#pragma once
// Internal: the syntax tree and the function table shared by the parser and the evaluator.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/expr/expr.hpp"
#include "jobs/expr/expr_lexer.hpp"

namespace jobs::expr_detail {

enum class Function {
    contains,
    starts_with,
    ends_with,
    format,
    join,
    to_json,
    from_json,
    case_,
    hash_files,
    success,
    failure,
    always,
    cancelled,
};

struct FunctionInfo {
    std::string_view name;  // lower case
    Function id;
    std::size_t min_args;
    std::size_t max_args;
    FunctionSet group;  // core, status or hash_files
};

// Case-insensitive lookup; nullptr for an unknown name.
const FunctionInfo* find_function(std::string_view name);

}  // namespace jobs::expr_detail

namespace jobs {

struct Expression::Node {
    enum class Type {
        literal,   // value
        context,   // name
        index,     // children[0][children[1]], children[1] null for `*`
        negation,  // !children[0]
        compare,   // children[0] op children[1]
        and_,      // children, left to right
        or_,       // children, left to right
        call,      // function(children...)
        group,     // (children[0])
    };
    Type type = Type::literal;
    Value value;
    std::string name;
    expr_detail::TokenType op = expr_detail::TokenType::end;
    expr_detail::Function function = expr_detail::Function::contains;
    std::vector<std::unique_ptr<const Node>> children;

    Node() = default;
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;
    // Releases the children iteratively: a comparison chain is as deep as it is long.
    ~Node();
};

}  // namespace jobs
