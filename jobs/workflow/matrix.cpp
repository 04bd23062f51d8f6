#include "jobs/workflow/matrix.hpp"

#include <algorithm>
#include <set>

#include "jobs/workflow/yaml_value.hpp"

namespace jobs {
namespace {

using common::ErrorKind;
using common::fail;

bool is_expression(const YamlNode& node) {
    return node.is_scalar() && node.scalar_type() == YamlNode::ScalarType::string &&
           has_expression(node.text);
}

// A vector: items evaluated, arrays from a lone-expression item spliced in.
ExprExpected<Value> evaluate_vector(const YamlNode& node, const EvalContext& context) {
    if (!node.is_sequence()) return evaluate_yaml(node, context);
    Array out;
    for (const auto& item : node.items) {
        auto value = evaluate_yaml(item, context);
        if (!value) return value;
        if (is_expression(item) && value->is_array()) {
            for (const auto& inner : value->as_array()) out.push_back(inner);
        } else {
            out.push_back(std::move(*value));
        }
    }
    return Value(std::move(out));
}

// True when every key/value of `entry` (restricted to `keys` when given) equals the
// combination's.
bool matches(const Object& combination, const Object& entry, const std::set<std::string>* keys) {
    for (const auto& [key, value] : entry) {
        if (keys != nullptr && !keys->contains(fold_case(key))) continue;
        const Value* ours = combination.find(key);
        if (ours == nullptr || !deep_equal(*ours, value)) return false;
    }
    return true;
}

common::Expected<std::vector<Object>> object_list(const Value& value, const std::string& what) {
    std::vector<Object> out;
    if (value.is_null()) return out;
    if (!value.is_array())
        return fail(ErrorKind::invalid_input,
                    "strategy.matrix." + what + " must be an array of objects");
    for (const auto& item : value.as_array()) {
        if (!item.is_object())
            return fail(ErrorKind::invalid_input, "strategy.matrix." + what +
                                                      " entries must be objects, not " +
                                                      std::string(to_string(item.kind())));
        out.push_back(item.as_object());
    }
    return out;
}

std::unexpected<common::Error> too_many_combinations() {
    return fail(
        ErrorKind::invalid_input,
        "the matrix has more than " + std::to_string(k_max_matrix_combinations) + " combinations");
}

// The vectors' cross product is enumerated lazily, and only combinations that survive
// `exclude` are built: GitHub's limit of 256 applies after exclude (MatrixBuilder.Build), so
// a product may be larger, but no more than this many combinations are ever looked at.
constexpr std::size_t k_max_matrix_product = std::size_t{1} << 20;

struct Vector {
    std::string key;
    const Array* values;
};

common::Expected<void> check_vector(const std::string& key, const Value& vector) {
    if (!vector.is_array())
        return fail(ErrorKind::invalid_input, "the matrix vector '" + key +
                                                  "' must be an array, not " +
                                                  std::string(to_string(vector.kind())));
    if (vector.as_array().empty())
        return fail(ErrorKind::invalid_input, "the matrix vector '" + key + "' has no values");
    return {};
}

// True when every key/value of the exclude entry equals the combination's (the combination
// given as one value index per vector).
bool excluded(const std::vector<Vector>& vectors, const std::vector<std::size_t>& at,
              const Object& exclude) {
    for (const auto& entry : exclude) {
        const auto vector = std::ranges::find_if(
            vectors, [&](const Vector& v) { return equals_ignore_case(v.key, entry.first); });
        if (vector == vectors.end()) return false;
        const auto index = static_cast<std::size_t>(vector - vectors.begin());
        if (!deep_equal((*vector->values)[at[index]], entry.second)) return false;
    }
    return true;
}

common::Expected<std::vector<Object>> cross_product(const std::vector<Vector>& vectors,
                                                    const std::vector<Object>& excludes) {
    std::vector<Object> out;
    if (vectors.empty()) return out;
    std::size_t product = 1;
    for (const auto& vector : vectors) {
        if (product > k_max_matrix_product / vector.values->size()) return too_many_combinations();
        product *= vector.values->size();
    }
    std::vector<std::size_t> at(vectors.size(), 0);  // mixed radix, the first vector slowest
    for (std::size_t n = 0; n < product; ++n) {
        const bool dropped = std::ranges::any_of(
            excludes, [&](const Object& ex) { return excluded(vectors, at, ex); });
        if (!dropped) {
            if (out.size() == k_max_matrix_combinations) return too_many_combinations();
            Object combination;
            for (std::size_t i = 0; i < vectors.size(); ++i)
                combination.set(vectors[i].key, (*vectors[i].values)[at[i]]);
            out.push_back(std::move(combination));
        }
        for (std::size_t i = vectors.size(); i-- > 0;) {
            if (++at[i] < vectors[i].values->size()) break;
            at[i] = 0;
        }
    }
    return out;
}

// GitHub's include: an entry extends every original combination whose vector values it
// matches (its other keys are added, replacing those an earlier include added); one that
// extends none is added as a combination of its own.
void apply_includes(std::vector<Object>& combinations, const std::vector<Object>& includes,
                    const std::set<std::string>& vector_keys) {
    const std::size_t original = combinations.size();
    for (const auto& include : includes) {
        bool extended = false;
        for (std::size_t i = 0; i < original; ++i) {
            if (!matches(combinations[i], include, &vector_keys)) continue;
            for (const auto& [key, value] : include) combinations[i].set(key, value);
            extended = true;
        }
        if (!extended) combinations.push_back(include);
    }
}

}  // namespace

ExprExpected<Value> evaluate_matrix(const YamlNode& matrix, const EvalContext& context) {
    if (!matrix.is_mapping()) return evaluate_yaml(matrix, context);
    Object out;
    for (const auto& entry : matrix.entries) {
        if (has_expression(entry.key)) {  // ${{ insert }} or a computed vector name
            SANDGATE_CHECK(evaluate_entry(entry, context, out));
            continue;
        }
        auto value = evaluate_vector(entry.value, context);
        if (!value) return value;
        out.set(entry.key, std::move(*value));
    }
    return Value(std::move(out));
}

common::Expected<std::vector<Value>> expand_matrix(const Value& matrix) {
    if (!matrix.is_object())
        return fail(ErrorKind::invalid_input, "strategy.matrix must be an object, not " +
                                                  std::string(to_string(matrix.kind())));
    std::vector<Vector> vectors;
    std::set<std::string> vector_keys;  // folded
    std::vector<Object> includes, excludes;
    for (const auto& [key, value] : matrix.as_object()) {
        if (equals_ignore_case(key, "include") || equals_ignore_case(key, "exclude")) {
            auto list = SANDGATE_TRY(object_list(value, key));
            (equals_ignore_case(key, "include") ? includes : excludes) = std::move(list);
            continue;
        }
        SANDGATE_CHECK(check_vector(key, value));
        vectors.push_back(Vector{key, &value.as_array()});
        vector_keys.insert(fold_case(key));
    }
    auto combinations = SANDGATE_TRY(cross_product(vectors, excludes));
    apply_includes(combinations, includes, vector_keys);
    if (combinations.size() > k_max_matrix_combinations) return too_many_combinations();
    if (combinations.empty())
        return fail(ErrorKind::invalid_input,
                    "the matrix has no combinations left after 'exclude'");
    std::vector<Value> out;
    for (auto& combination : combinations) out.emplace_back(std::move(combination));
    return out;
}

std::vector<Value> filter_matrix(std::vector<Value> combinations,
                                 const std::vector<std::pair<std::string, std::string>>& filter) {
    if (filter.empty()) return combinations;
    std::erase_if(combinations, [&](const Value& combination) {
        for (const auto& [key, value] : combination.as_object()) {
            bool filtered = false, allowed = false;
            for (const auto& [fkey, fvalue] : filter) {
                if (!equals_ignore_case(fkey, key)) continue;
                filtered = true;
                allowed = allowed || value.to_display_string() == fvalue;
            }
            if (filtered && !allowed) return true;
        }
        return false;
    });
    return combinations;
}

}  // namespace jobs
