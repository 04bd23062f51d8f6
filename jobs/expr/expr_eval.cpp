// The tree walk. A `.*`/`[*]` result is a "filtered" array: indexing it applies the index to
// each element (github.event.commits.*.author.name), which a plain array does not do.
#include <cmath>
#include <optional>

#include "jobs/expr/expr_functions.hpp"
#include "jobs/expr/expr_parser.hpp"

namespace jobs {
namespace {

using Node = Expression::Node;
using expr_detail::TokenType;

// GitHub caps the memory an evaluation may hold at about 1 MiB, counting strings as UTF-16.
constexpr std::size_t k_max_memory = 1024 * 1024;

std::size_t cost(const Value& value) {
    return value.is_string() ? 2 * value.as_string().size() + 50 : 24;
}

struct Operand {
    Value value;
    bool filtered = false;
};

// The index of an index access, as GitHub's idxHelper reads it: a string key for
// primitives, a non-negative integer when the number is finite. The integer is computed only
// when an array is indexed (a property name would otherwise go through Number() each time).
class Key {
public:
    Key() : m_star(true) {}
    explicit Key(Value index) : m_index(std::move(index)) {}

    bool star() const { return m_star; }
    std::optional<std::size_t> position() const {
        const double number = m_index.to_number();
        if (!std::isfinite(number) || number < 0) return std::nullopt;
        const double floor = std::floor(number);
        return floor >= 1e18 ? static_cast<std::size_t>(-1) : static_cast<std::size_t>(floor);
    }
    // Object member lookup without copying a string key.
    const Value* find_in(const Object& object) const {
        if (m_index.is_string()) return object.find(m_index.as_string());
        if (!m_index.is_primitive()) return nullptr;
        return object.find(m_index.to_display_string());
    }

private:
    bool m_star = false;
    Value m_index;
};

void append_all(const Value& container, Array& out) {
    if (container.is_array()) {
        for (const auto& item : container.as_array()) out.push_back(item);
    } else if (container.is_object()) {
        for (const auto& [name, item] : container.as_object()) out.push_back(item);
    }
}

Operand filtered_access(const Value& filtered, const Key& key) {
    Array out;
    const auto position = key.star() ? std::nullopt : key.position();
    for (const auto& item : filtered.as_array()) {
        if (key.star()) {
            append_all(item, out);
        } else if (item.is_object()) {
            if (const Value* found = key.find_in(item.as_object())) out.push_back(*found);
        } else if (item.is_array() && position && *position < item.as_array().size()) {
            out.push_back(item.as_array()[*position]);
        }
    }
    return Operand{Value(std::move(out)), true};
}

Operand access(const Operand& target, const Key& key) {
    const Value& value = target.value;
    if (value.is_array() && target.filtered) return filtered_access(value, key);
    if (key.star()) {
        Array out;
        append_all(value, out);
        return Operand{Value(std::move(out)), true};
    }
    if (value.is_array()) {
        const auto& array = value.as_array();
        const auto position = key.position();
        if (position && *position < array.size()) return Operand{array[*position]};
    } else if (value.is_object()) {
        if (const Value* found = key.find_in(value.as_object())) return Operand{*found};
    }
    return Operand{};
}

class Evaluator {
public:
    explicit Evaluator(const EvalContext& context) : m_context(context) {}

    ExprExpected<Operand> eval(const Node& node) {
        switch (node.type) {
            case Node::Type::literal:
                return Operand{node.value};
            case Node::Type::context: {
                const Value* found = m_context.contexts.find(node.name);
                return Operand{found ? *found : Value()};
            }
            case Node::Type::group:
                return eval(*node.children[0]);
            case Node::Type::negation: {
                auto operand = eval(*node.children[0]);
                if (!operand) return operand;
                return Operand{Value(!operand->value.truthy())};
            }
            case Node::Type::compare:
                return compare(node);
            case Node::Type::and_:
            case Node::Type::or_:
                return logical(node);
            case Node::Type::index:
                return index(node);
            case Node::Type::call:
                return call(node);
        }
        return Operand{};
    }

    ExprExpected<void> charge(std::size_t bytes) {
        m_memory += bytes;
        if (m_memory > k_max_memory) {
            return std::unexpected(ExprError{ExprError::Phase::evaluation,
                                             "The maximum allowed memory size was exceeded"});
        }
        return {};
    }

private:
    // A chain `a == b == c ...` is a left-deep tree as long as the expression (GitHub counts
    // no depth for it): walked iteratively, whatever its length.
    ExprExpected<Operand> compare(const Node& top) {
        std::vector<const Node*> chain{&top};
        while (chain.back()->children[0]->type == Node::Type::compare)
            chain.push_back(chain.back()->children[0].get());
        auto left = eval(*chain.back()->children[0]);
        if (!left) return left;
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            auto right = eval(*(*it)->children[1]);
            if (!right) return right;
            left = Operand{Value(compare_values((*it)->op, left->value, right->value))};
        }
        return left;
    }

    static bool compare_values(TokenType op, const Value& l, const Value& r) {
        bool result = false;
        switch (op) {
            case TokenType::equal_equal:
                result = expr_detail::loose_equals(l, r);
                break;
            case TokenType::bang_equal:
                result = !expr_detail::loose_equals(l, r);
                break;
            case TokenType::greater:
                result = expr_detail::greater_than(l, r);
                break;
            case TokenType::greater_equal:
                result = expr_detail::loose_equals(l, r) || expr_detail::greater_than(l, r);
                break;
            case TokenType::less:
                result = expr_detail::less_than(l, r);
                break;
            case TokenType::less_equal:
                result = expr_detail::loose_equals(l, r) || expr_detail::less_than(l, r);
                break;
            default:
                break;
        }
        return result;
    }

    // && and || return the deciding operand itself, not a boolean.
    ExprExpected<Operand> logical(const Node& node) {
        const bool is_and = node.type == Node::Type::and_;
        ExprExpected<Operand> result = Operand{};
        for (const auto& child : node.children) {
            result = eval(*child);
            if (!result) return result;
            if (result->value.truthy() != is_and) break;
        }
        return result;
    }

    ExprExpected<Operand> index(const Node& node) {
        Key key;
        if (node.children[1]) {
            auto index_value = eval(*node.children[1]);
            if (!index_value) return index_value;
            key = Key(std::move(index_value->value));
        }
        auto target = eval(*node.children[0]);
        if (!target) return target;
        return access(*target, key);
    }

    ExprExpected<Operand> call(const Node& node) {
        const std::size_t saved = m_memory;
        std::vector<Value> args;
        args.reserve(node.children.size());
        for (const auto& child : node.children) {
            auto arg = eval(*child);
            if (!arg) return arg;
            SANDGATE_CHECK(charge(cost(arg->value)));
            args.push_back(std::move(arg->value));
        }
        auto result = SANDGATE_TRY(expr_detail::call_function(node.function, args, m_context));
        m_memory = saved;
        SANDGATE_CHECK(charge(cost(result)));
        m_memory = saved;
        return Operand{std::move(result)};
    }

    const EvalContext& m_context;
    std::size_t m_memory = 0;
};

}  // namespace

ExprExpected<Value> Expression::evaluate(const EvalContext& context) const {
    if (!m_root) return Value();
    Evaluator evaluator(context);
    auto result = SANDGATE_TRY(evaluator.eval(*m_root));
    return std::move(result.value);
}

}  // namespace jobs
