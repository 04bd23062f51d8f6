#pragma once
// Internal: the expression lexer (GitHub's token rules, including its quirks: `.` after a
// value is a dereference, anywhere else it starts a number; keywords are not keywords after a
// `.`; numbers are JavaScript Number() of the run of non-boundary characters).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/expr/expr.hpp"

namespace jobs::expr_detail {

enum class TokenType {
    left_paren,
    right_paren,
    left_bracket,
    right_bracket,
    comma,
    dot,
    bang,
    bang_equal,
    equal_equal,
    greater,
    greater_equal,
    less,
    less_equal,
    and_,
    or_,
    star,
    number,
    string,
    identifier,
    true_,
    false_,
    null,
    end,
};

struct Token {
    TokenType type = TokenType::end;
    std::string_view lexeme;  // a view into the expression text
    std::size_t offset = 0;   // byte offset of the lexeme's start
    double number = 0;        // for number
    std::string string;       // for string: the unquoted value
};

inline constexpr std::size_t k_max_expression_length = 21000;
inline constexpr int k_max_depth = 50;

// The tokens, ending with an `end` token; or a lexing error.
ExprExpected<std::vector<Token>> lex(std::string_view input);

// "Located at position N within expression: TEXT": N counts UTF-16 code units from 1, as
// GitHub reports it.
std::string located(std::string_view input, std::size_t byte_offset);

}  // namespace jobs::expr_detail
