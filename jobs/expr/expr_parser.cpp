// Recursive descent with GitHub's precedence and its depth accounting (the limit of 50 counts
// the same nodes GitHub counts, so the same expressions pass and fail).
#include "jobs/expr/expr_parser.hpp"

#include <charconv>
#include <limits>
#include <optional>

namespace jobs::expr_detail {

namespace {
constexpr std::size_t k_unbounded = std::numeric_limits<std::size_t>::max();

constexpr FunctionInfo k_functions[] = {
    {"contains", Function::contains, 2, 2, FunctionSet::core},
    {"startswith", Function::starts_with, 2, 2, FunctionSet::core},
    {"endswith", Function::ends_with, 2, 2, FunctionSet::core},
    {"format", Function::format, 1, 255, FunctionSet::core},
    {"join", Function::join, 1, 2, FunctionSet::core},
    {"tojson", Function::to_json, 1, 1, FunctionSet::core},
    {"fromjson", Function::from_json, 1, 1, FunctionSet::core},
    {"case", Function::case_, 3, k_unbounded, FunctionSet::core},
    {"hashfiles", Function::hash_files, 1, 255, FunctionSet::hash_files},
    // success(job, ...) and failure(job, ...) test given needed jobs: GitHub allows that in a
    // job's `if` only (job-if's `success(0,MAX)`), which the schema check enforces at load.
    {"success", Function::success, 0, k_unbounded, FunctionSet::status},
    {"failure", Function::failure, 0, k_unbounded, FunctionSet::status},
    {"always", Function::always, 0, 0, FunctionSet::status},
    {"cancelled", Function::cancelled, 0, 0, FunctionSet::status},
};
}  // namespace

const FunctionInfo* find_function(std::string_view name) {
    for (const auto& info : k_functions) {
        if (equals_ignore_case(info.name, name)) return &info;
    }
    return nullptr;
}

namespace {

using Node = Expression::Node;
using NodePtr = std::unique_ptr<Node>;

class Parser {
public:
    // Allowed names: `names`, or the keys of `contexts` when given.
    Parser(std::string_view input, std::vector<Token> tokens, std::span<const std::string> names,
           const Object* contexts, FunctionSet functions)
        : m_input(input),
          m_tokens(std::move(tokens)),
          m_names(names),
          m_contexts(contexts),
          m_functions(functions) {}

    // The functions beyond the core ones come from `signatures` (a schema's allowed context)
    // instead of the function set, with the arities given there.
    void use_signatures(std::span<const FunctionSignature> signatures) {
        m_signatures = signatures;
        m_use_signatures = true;
    }

    // nullptr with no error for the empty expression.
    ExprExpected<NodePtr> run() {
        if (at_end()) return NodePtr{};
        auto root = expression();
        if (root && !at_end()) error("Unexpected symbol", peek());
        if (m_error) return std::unexpected(*m_error);
        return root;
    }

    bool uses_status() const { return m_uses_status; }

private:
    // ---- grammar ----

    NodePtr expression() {
        if (!enter(peek())) return nullptr;
        auto node = logical(TokenType::or_);
        --m_depth;
        return node;
    }

    // or_: operands are and-chains; and_: operands are equality chains.
    NodePtr logical(TokenType op) {
        auto operand = [this, op]() {
            return op == TokenType::or_ ? logical(TokenType::and_) : equality();
        };
        auto first = operand();
        if (!first || !check(op)) return first;
        if (!enter(peek())) return nullptr;
        auto node = std::make_unique<Node>();
        node->type = op == TokenType::or_ ? Node::Type::or_ : Node::Type::and_;
        node->children.push_back(std::move(first));
        while (match(op)) {
            auto next = operand();
            if (!next) return nullptr;
            node->children.push_back(std::move(next));
        }
        --m_depth;
        return node;
    }

    NodePtr equality() {
        auto left = comparison();
        while (left && (check(TokenType::bang_equal) || check(TokenType::equal_equal))) {
            const auto op = next().type;
            left = binary(std::move(left), op, comparison());
        }
        return left;
    }

    NodePtr comparison() {
        auto left = unary();
        while (left && (check(TokenType::greater) || check(TokenType::greater_equal) ||
                        check(TokenType::less) || check(TokenType::less_equal))) {
            const auto op = next().type;
            left = binary(std::move(left), op, unary());
        }
        return left;
    }

    static NodePtr binary(NodePtr left, TokenType op, NodePtr right) {
        if (!right) return nullptr;
        auto node = std::make_unique<Node>();
        node->type = Node::Type::compare;
        node->op = op;
        node->children.push_back(std::move(left));
        node->children.push_back(std::move(right));
        return node;
    }

    NodePtr unary() {
        if (!match(TokenType::bang)) return index();
        if (!enter(peek())) return nullptr;
        auto operand = unary();
        --m_depth;
        if (!operand) return nullptr;
        auto node = std::make_unique<Node>();
        node->type = Node::Type::negation;
        node->children.push_back(std::move(operand));
        return node;
    }

    NodePtr index() {
        auto expr = call();
        if (!expr) return nullptr;
        if (expr->type != Node::Type::group && expr->type != Node::Type::call &&
            expr->type != Node::Type::context) {
            return expr;
        }
        int entered = 0;
        for (;;) {
            NodePtr key;
            if (match(TokenType::left_bracket)) {
                if (!match(TokenType::star)) {
                    key = expression();
                    if (!key) return nullptr;
                }
                if (!consume(TokenType::right_bracket) || !enter(peek())) return nullptr;
            } else if (match(TokenType::dot)) {
                if (!enter(peek())) return nullptr;
                if (match(TokenType::identifier)) {
                    key = std::make_unique<Node>();
                    key->value = Value(std::string(previous().lexeme));
                } else if (!match(TokenType::star)) {
                    error("Unexpected symbol", peek());
                    return nullptr;
                }
            } else {
                break;
            }
            ++entered;
            auto node = std::make_unique<Node>();
            node->type = Node::Type::index;
            node->children.push_back(std::move(expr));
            node->children.push_back(std::move(key));
            expr = std::move(node);
        }
        m_depth -= entered;
        return expr;
    }

    NodePtr call() {
        if (!check(TokenType::identifier)) return primary();
        const Token& identifier = next();
        if (!match(TokenType::left_paren)) {
            if (!known_name(identifier.lexeme)) {
                error("Unrecognized named-value", identifier);
                return nullptr;
            }
            auto node = std::make_unique<Node>();
            node->type = Node::Type::context;
            node->name = std::string(identifier.lexeme);
            return node;
        }
        auto node = std::make_unique<Node>();
        node->type = Node::Type::call;
        while (!match(TokenType::right_paren)) {
            auto argument = expression();
            if (!argument) return nullptr;
            node->children.push_back(std::move(argument));
            if (!check(TokenType::right_paren) && !consume(TokenType::comma)) return nullptr;
        }
        const FunctionInfo* info = find_function(identifier.lexeme);
        std::size_t min_args = info != nullptr ? info->min_args : 0;
        std::size_t max_args = info != nullptr ? info->max_args : 0;
        if (m_use_signatures && (info == nullptr || info->group != FunctionSet::core)) {
            const FunctionSignature* signature = find_signature(identifier.lexeme);
            if (signature == nullptr) return error("Unrecognized function", identifier), nullptr;
            min_args = signature->min_args;
            max_args = signature->max_args;
        } else if (info == nullptr || !has(m_functions, info->group)) {
            error("Unrecognized function", identifier);
            return nullptr;
        }
        const auto count = node->children.size();
        if (count < min_args) return error("Too few parameters supplied", identifier), nullptr;
        if (count > max_args) return error("Too many parameters supplied", identifier), nullptr;
        if (info == nullptr) {  // a schema's function this engine does not evaluate: syntax only
            node->name = std::string(identifier.lexeme);
            return node;
        }
        if (info->id == Function::case_ && count % 2 == 0) {
            error("Even number of parameters supplied, requires an odd number of parameters",
                  identifier);
            return nullptr;
        }
        if (info->group == FunctionSet::status) m_uses_status = true;
        node->function = info->id;
        node->name = std::string(info->name);
        return node;
    }

    NodePtr primary() {
        auto literal = [this](Value value) {
            auto node = std::make_unique<Node>();
            node->value = std::move(value);
            return node;
        };
        if (match(TokenType::false_)) return literal(Value(false));
        if (match(TokenType::true_)) return literal(Value(true));
        if (match(TokenType::null)) return literal(Value());
        if (match(TokenType::number)) return literal(Value(previous().number));
        if (match(TokenType::string)) return literal(Value(previous().string));
        if (match(TokenType::left_paren)) {
            auto inner = expression();
            if (!inner) return nullptr;
            if (at_end()) {
                error("Unexpected end of expression", previous());
                return nullptr;
            }
            if (!consume(TokenType::right_paren)) return nullptr;
            auto node = std::make_unique<Node>();
            node->type = Node::Type::group;
            node->children.push_back(std::move(inner));
            return node;
        }
        if (at_end()) {
            error("Unexpected end of expression", previous());
        } else {
            error("Unexpected symbol", peek());
        }
        return nullptr;
    }

    // ---- tokens ----

    const Token& peek() const { return m_tokens[m_offset]; }
    const Token& previous() const { return m_tokens[m_offset - 1]; }
    bool at_end() const { return peek().type == TokenType::end; }
    bool check(TokenType type) const { return !at_end() && peek().type == type; }
    const Token& next() {
        if (!at_end()) ++m_offset;
        return previous();
    }
    bool match(TokenType type) {
        if (!check(type)) return false;
        ++m_offset;
        return true;
    }
    bool consume(TokenType type) {
        if (match(type)) return true;
        error("Unexpected symbol", peek());
        return false;
    }

    const FunctionSignature* find_signature(std::string_view name) const {
        for (const auto& signature : m_signatures) {
            if (equals_ignore_case(signature.name, name)) return &signature;
        }
        return nullptr;
    }

    bool known_name(std::string_view name) const {
        if (m_contexts != nullptr) return m_contexts->contains(name);
        for (const auto& known : m_names) {
            if (equals_ignore_case(known, name)) return true;
        }
        return false;
    }

    bool enter(const Token& at) {
        if (++m_depth > k_max_depth) {
            error("Exceeded max expression depth " + std::to_string(k_max_depth), at);
            return false;
        }
        return true;
    }

    void error(std::string_view description, const Token& token) {
        if (m_error) return;
        // GitHub names the token by its lexeme, a string by its value, the end as "EOF".
        std::string shown = token.type == TokenType::end      ? std::string("EOF")
                            : token.type == TokenType::string ? token.string
                                                              : std::string(token.lexeme);
        m_error = ExprError{ExprError::Phase::parsing, std::string(description) + ": '" + shown +
                                                           "'. " + located(m_input, token.offset)};
    }

    std::string_view m_input;
    std::vector<Token> m_tokens;
    std::span<const std::string> m_names;
    const Object* m_contexts = nullptr;
    FunctionSet m_functions;
    std::span<const FunctionSignature> m_signatures;
    bool m_use_signatures = false;
    std::size_t m_offset = 0;
    int m_depth = 0;
    bool m_uses_status = false;
    std::optional<ExprError> m_error;
};

}  // namespace
}  // namespace jobs::expr_detail

namespace jobs {

Expression::Node::~Node() {
    std::vector<std::unique_ptr<const Node>> pending;
    for (auto& child : children) pending.push_back(std::move(child));
    while (!pending.empty()) {
        std::unique_ptr<const Node> node = std::move(pending.back());
        pending.pop_back();
        if (!node) continue;
        // Every node is made non-const (make_unique<Node>) and only held as const.
        for (auto& child : const_cast<Node&>(*node).children) pending.push_back(std::move(child));
    }
}

namespace {

struct Parsed {
    std::unique_ptr<Expression::Node> root;
    bool uses_status = false;
};

ExprExpected<Parsed> parse_with(std::string_view text, std::span<const std::string> names,
                                const Object* contexts, FunctionSet functions) {
    auto tokens = SANDGATE_TRY(expr_detail::lex(text));
    expr_detail::Parser parser(text, std::move(tokens), names, contexts, functions);
    auto root = SANDGATE_TRY(parser.run());
    return Parsed{std::move(root), parser.uses_status()};
}

}  // namespace

ExprExpected<Expression> parse(std::string_view text, std::span<const std::string> names,
                               FunctionSet functions) {
    auto parsed = SANDGATE_TRY(parse_with(text, names, nullptr, functions));
    Expression expression;
    expression.m_root = std::move(parsed.root);
    expression.m_text = std::string(text);
    expression.m_uses_status = parsed.uses_status;
    return expression;
}

ExprExpected<Expression> parse(std::string_view text, const Object& contexts,
                               FunctionSet functions) {
    auto parsed = SANDGATE_TRY(parse_with(text, {}, &contexts, functions));
    Expression expression;
    expression.m_root = std::move(parsed.root);
    expression.m_text = std::string(text);
    expression.m_uses_status = parsed.uses_status;
    return expression;
}

namespace {

// Whether the tree calls a status function (GitHub's walkTreeToFindStatusFunctionCalls).
bool has_status_call(const Expression::Node& node) {
    // Iterative: the tree is at most k_max_depth deep, but comparison chains are wide.
    std::vector<const Expression::Node*> pending{&node};
    while (!pending.empty()) {
        const Expression::Node* current = pending.back();
        pending.pop_back();
        if (current->type == Expression::Node::Type::call) {
            const auto* info = expr_detail::find_function(current->name);
            if (info != nullptr && info->group == FunctionSet::status) return true;
        }
        for (const auto& child : current->children) {
            if (child) pending.push_back(child.get());
        }
    }
    return false;
}

ExprExpected<std::unique_ptr<Expression::Node>> parse_allowed(std::string_view text,
                                                              const AllowedContext& allowed) {
    auto tokens = SANDGATE_TRY(expr_detail::lex(text));
    expr_detail::Parser parser(text, std::move(tokens), allowed.names, nullptr, FunctionSet::core);
    parser.use_signatures(allowed.functions);
    auto root = SANDGATE_TRY(parser.run());
    return root;
}

}  // namespace

AllowedContext split_allowed_context(std::span<const std::string_view> context) {
    AllowedContext out;
    for (auto entry : context) {
        const auto open = entry.find('(');
        const auto comma = entry.find(',', open == std::string_view::npos ? 0 : open);
        if (open == std::string_view::npos || comma == std::string_view::npos ||
            !entry.ends_with(")")) {
            out.names.emplace_back(entry);
            continue;
        }
        FunctionSignature signature;
        signature.name = std::string(entry.substr(0, open));
        const auto min_text = entry.substr(open + 1, comma - open - 1);
        const auto max_text = entry.substr(comma + 1, entry.size() - comma - 2);
        std::from_chars(min_text.data(), min_text.data() + min_text.size(), signature.min_args);
        if (max_text == "MAX")
            signature.max_args = std::numeric_limits<std::size_t>::max();
        else
            std::from_chars(max_text.data(), max_text.data() + max_text.size(), signature.max_args);
        out.functions.push_back(std::move(signature));
    }
    return out;
}

ExprExpected<void> validate_expression(std::string_view expression, const AllowedContext& allowed) {
    (void)SANDGATE_TRY(parse_allowed(expression, allowed));
    return {};
}

bool calls_status_function(std::string_view expression, const AllowedContext& allowed) {
    auto root = parse_allowed(expression, allowed);
    return root && *root && has_status_call(**root);
}

}  // namespace jobs
