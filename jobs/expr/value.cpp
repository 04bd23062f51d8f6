#include "jobs/expr/value.hpp"

#include <cmath>
#include <limits>

namespace jobs {

std::string_view to_string(Kind kind) {
    switch (kind) {
        case Kind::null:
            return "Null";
        case Kind::boolean:
            return "Boolean";
        case Kind::number:
            return "Number";
        case Kind::string:
            return "String";
        case Kind::array:
            return "Array";
        case Kind::object:
            return "Object";
    }
    return "Null";
}

// ---- Object ----

Object::Object(std::initializer_list<Entry> entries) {
    for (const auto& [key, value] : entries) set(key, value);
}

std::ptrdiff_t Object::index_of(std::string_view key) const {
    if (!m_index.empty()) {
        const auto found = m_index.find(fold_case(key));
        return found == m_index.end() ? -1 : static_cast<std::ptrdiff_t>(found->second);
    }
    for (std::size_t i = 0; i < m_entries.size(); ++i) {
        if (equals_ignore_case(m_entries[i].first, key)) return static_cast<std::ptrdiff_t>(i);
    }
    return -1;
}

void Object::rebuild_index() {
    m_index.clear();
    if (m_entries.size() <= k_index_threshold) return;
    for (std::size_t i = 0; i < m_entries.size(); ++i)
        m_index.emplace(fold_case(m_entries[i].first), i);
}

const Value* Object::find(std::string_view key) const {
    const auto index = index_of(key);
    return index < 0 ? nullptr : &m_entries[static_cast<std::size_t>(index)].second;
}

Value* Object::find(std::string_view key) {
    const auto index = index_of(key);
    return index < 0 ? nullptr : &m_entries[static_cast<std::size_t>(index)].second;
}

void Object::set(std::string key, Value value) {
    if (Value* existing = find(key)) {
        *existing = std::move(value);
        return;
    }
    insert(std::move(key), std::move(value));
}

bool Object::insert(std::string key, Value value) {
    if (find(key) != nullptr) return false;
    m_entries.emplace_back(std::move(key), std::move(value));
    if (!m_index.empty()) {
        m_index.emplace(fold_case(m_entries.back().first), m_entries.size() - 1);
    } else if (m_entries.size() > k_index_threshold) {
        rebuild_index();
    }
    return true;
}

bool Object::erase(std::string_view key) {
    const auto index = index_of(key);
    if (index < 0) return false;
    m_entries.erase(m_entries.begin() + index);
    if (!m_index.empty()) rebuild_index();
    return true;
}

// ---- Value ----

Value::Value(const Value& other) = default;
Value::Value(Value&& other) noexcept = default;
Value& Value::operator=(const Value& other) = default;
Value& Value::operator=(Value&& other) noexcept = default;
Value::~Value() = default;

Array& Value::mutable_array() {
    auto& shared = std::get<std::shared_ptr<Array>>(m_data);
    if (shared.use_count() > 1) shared = std::make_shared<Array>(*shared);
    return *shared;
}

Object& Value::mutable_object() {
    auto& shared = std::get<std::shared_ptr<Object>>(m_data);
    if (shared.use_count() > 1) shared = std::make_shared<Object>(*shared);
    return *shared;
}

const Value* Value::get(std::string_view key) const {
    return is_object() ? as_object().find(key) : nullptr;
}

bool Value::same_container(const Value& other) const {
    if (kind() != other.kind()) return false;
    if (is_array()) return &as_array() == &other.as_array();
    if (is_object()) return &as_object() == &other.as_object();
    return false;
}

bool Value::truthy() const {
    switch (kind()) {
        case Kind::null:
            return false;
        case Kind::boolean:
            return as_boolean();
        case Kind::number:
            return as_number() != 0 && !std::isnan(as_number());
        case Kind::string:
            return !as_string().empty();
        case Kind::array:
        case Kind::object:
            return true;
    }
    return false;
}

double Value::to_number() const {
    switch (kind()) {
        case Kind::null:
            return 0;
        case Kind::boolean:
            return as_boolean() ? 1 : 0;
        case Kind::number:
            return as_number();
        case Kind::string:
            return parse_number(as_string());
        case Kind::array:
        case Kind::object:
            return std::numeric_limits<double>::quiet_NaN();
    }
    return 0;
}

std::string Value::to_display_string() const {
    switch (kind()) {
        case Kind::null:
            return "";
        case Kind::boolean:
            return as_boolean() ? "true" : "false";
        case Kind::number:
            return format_number(as_number());
        case Kind::string:
            return as_string();
        case Kind::array:
            return "Array";
        case Kind::object:
            return "Object";
    }
    return "";
}

bool deep_equal(const Value& left, const Value& right) {
    if (left.kind() != right.kind()) return false;
    switch (left.kind()) {
        case Kind::null:
            return true;
        case Kind::boolean:
            return left.as_boolean() == right.as_boolean();
        case Kind::number:
            return left.as_number() == right.as_number();
        case Kind::string:
            return left.as_string() == right.as_string();
        case Kind::array: {
            const auto& a = left.as_array();
            const auto& b = right.as_array();
            if (a.size() != b.size()) return false;
            for (std::size_t i = 0; i < a.size(); ++i) {
                if (!deep_equal(a[i], b[i])) return false;
            }
            return true;
        }
        case Kind::object: {
            const auto& a = left.as_object();
            const auto& b = right.as_object();
            if (a.size() != b.size()) return false;
            for (std::size_t i = 0; i < a.size(); ++i) {
                const auto& [key_a, value_a] = a.entries()[i];
                const auto& [key_b, value_b] = b.entries()[i];
                if (key_a != key_b || !deep_equal(value_a, value_b)) return false;
            }
            return true;
        }
    }
    return false;
}

}  // namespace jobs
