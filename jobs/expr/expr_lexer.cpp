#include "jobs/expr/expr_lexer.hpp"

#include <cmath>

namespace jobs::expr_detail {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool is_boundary(char c) {
    switch (c) {
        case '(':
        case '[':
        case ')':
        case ']':
        case ',':
        case '.':
        case '!':
        case '>':
        case '<':
        case '=':
        case '&':
        case '|':
            return true;
        default:
            return is_space(c);
    }
}

bool is_legal_identifier(std::string_view text) {
    if (text.empty()) return false;
    const auto letter = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    if (!letter(text[0])) return false;
    for (char c : text.substr(1)) {
        if (!letter(c) && !(c >= '0' && c <= '9') && c != '-') return false;
    }
    return true;
}

class Lexer {
public:
    explicit Lexer(std::string_view input) : m_input(input) {}

    ExprExpected<std::vector<Token>> run() {
        if (m_input.size() > k_max_expression_length) {
            return fail("Exceeded max expression length " +
                        std::to_string(k_max_expression_length));
        }
        while (m_offset < m_input.size()) {
            m_start = m_offset;
            if (!step(m_input[m_offset++])) return std::unexpected(*m_error);
        }
        m_tokens.push_back(
            Token{TokenType::end, m_input.substr(m_input.size()), m_input.size(), 0, {}});
        return std::move(m_tokens);
    }

private:
    static std::unexpected<ExprError> fail(std::string message) {
        return std::unexpected(ExprError{ExprError::Phase::lexing, std::move(message)});
    }

    bool step(char c) {
        switch (c) {
            case '(':
                return add(TokenType::left_paren);
            case ')':
                return add(TokenType::right_paren);
            case '[':
                return add(TokenType::left_bracket);
            case ']':
                return add(TokenType::right_bracket);
            case ',':
                return add(TokenType::comma);
            case '*':
                return add(TokenType::star);
            case '.': {
                const auto prev = previous();
                if (prev != TokenType::identifier && prev != TokenType::right_bracket &&
                    prev != TokenType::right_paren && prev != TokenType::star) {
                    return number();
                }
                return add(TokenType::dot);
            }
            case '-':
            case '+':
                return number();
            case '!':
                return add(match('=') ? TokenType::bang_equal : TokenType::bang);
            case '<':
                return add(match('=') ? TokenType::less_equal : TokenType::less);
            case '>':
                return add(match('=') ? TokenType::greater_equal : TokenType::greater);
            case '=':
                return match('=') ? add(TokenType::equal_equal) : identifier();
            case '&':
                return match('&') ? add(TokenType::and_) : identifier();
            case '|':
                return match('|') ? add(TokenType::or_) : identifier();
            case ' ':
            case '\t':
            case '\r':
            case '\n':
                return true;
            case '\'':
                return string();
            default:
                return c >= '0' && c <= '9' ? number() : identifier();
        }
    }

    TokenType previous() const { return m_tokens.empty() ? TokenType::end : m_tokens.back().type; }

    bool match(char expected) {
        if (m_offset >= m_input.size() || m_input[m_offset] != expected) return false;
        ++m_offset;
        return true;
    }

    std::string_view lexeme() const { return m_input.substr(m_start, m_offset - m_start); }

    bool add(TokenType type, double number = 0, std::string string = {}) {
        m_tokens.push_back(Token{type, lexeme(), m_start, number, std::move(string)});
        return true;
    }

    bool error_symbol(std::string_view symbol) {
        m_error = ExprError{ExprError::Phase::lexing, "Unexpected symbol: '" + std::string(symbol) +
                                                          "'. " + located(m_input, m_start)};
        return false;
    }

    bool number() {
        while (m_offset < m_input.size() &&
               (!is_boundary(m_input[m_offset]) || m_input[m_offset] == '.')) {
            ++m_offset;
        }
        const double value = parse_number(lexeme());
        if (std::isnan(value)) return error_symbol(lexeme());
        return add(TokenType::number, value);
    }

    bool string() {
        while (m_offset < m_input.size() &&
               (m_input[m_offset] != '\'' ||
                (m_offset + 1 < m_input.size() && m_input[m_offset + 1] == '\''))) {
            if (m_input[m_offset] == '\'') ++m_offset;  // an escaped '' pair
            ++m_offset;
        }
        if (m_offset >= m_input.size()) return error_symbol(m_input.substr(m_start));
        ++m_offset;  // the closing quote
        const auto inner = m_input.substr(m_start + 1, m_offset - m_start - 2);
        std::string value;
        value.reserve(inner.size());
        for (std::size_t i = 0; i < inner.size(); ++i) {
            value.push_back(inner[i]);
            if (inner[i] == '\'') ++i;  // '' -> '
        }
        return add(TokenType::string, 0, std::move(value));
    }

    bool identifier() {
        while (m_offset < m_input.size() && !is_boundary(m_input[m_offset])) ++m_offset;
        const auto text = lexeme();
        if (!is_legal_identifier(text)) return error_symbol(text);
        if (previous() != TokenType::dot) {
            if (text == "true") return add(TokenType::true_);
            if (text == "false") return add(TokenType::false_);
            if (text == "null") return add(TokenType::null);
            if (text == "NaN") return add(TokenType::number, std::nan(""));
            if (text == "Infinity") return add(TokenType::number, INFINITY);
        }
        return add(TokenType::identifier);
    }

    std::string_view m_input;
    std::size_t m_start = 0;
    std::size_t m_offset = 0;
    std::vector<Token> m_tokens;
    std::optional<ExprError> m_error;
};

}  // namespace

ExprExpected<std::vector<Token>> lex(std::string_view input) {
    return Lexer(input).run();
}

std::string located(std::string_view input, std::size_t byte_offset) {
    std::size_t units = 0;
    for (std::size_t i = 0; i < byte_offset && i < input.size(); ++i) {
        const auto c = static_cast<unsigned char>(input[i]);
        if ((c & 0xC0) != 0x80) units += (c >= 0xF0) ? 2 : 1;  // 4-byte UTF-8: a surrogate pair
    }
    return "Located at position " + std::to_string(units + 1) +
           " within expression: " + std::string(input);
}

}  // namespace jobs::expr_detail
