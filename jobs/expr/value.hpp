#pragma once
// The data model of GitHub Actions contexts and expression results: Null, Boolean, Number
// (a double), String (UTF-8), Array and Object. Objects keep insertion order and look keys up
// case-insensitively, as GitHub's contexts do (`github.SHA` finds `sha`).
//
// Arrays and objects are shared, reference-counted containers: copying a Value is cheap and
// the copy refers to the same container, which is what gives `obj == obj` its reference
// equality. The mutable accessors copy the container first when it is shared (copy on write),
// so a mutation never shows through another Value. Threads may read shared Values freely;
// mutate only a Value that no other thread can reach at the time.

#include <cstddef>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "common/error.hpp"

namespace jobs {

class Value;

enum class Kind { null, boolean, number, string, array, object };

// "Null", "Boolean", "Number", "String", "Array", "Object": the spelling GitHub and the
// `sandgate expr` output use.
std::string_view to_string(Kind kind);

using Array = std::vector<Value>;

// An insertion-ordered map with case-insensitive keys. Setting a key that exists under any
// casing replaces the value in place and keeps the first spelling of the key.
class Object {
public:
    using Entry = std::pair<std::string, Value>;

    Object() = default;
    Object(std::initializer_list<Entry> entries);

    // nullptr when absent. The pointer is valid until the object is next modified.
    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    bool contains(std::string_view key) const { return find(key) != nullptr; }

    void set(std::string key, Value value);
    // Adds only when the key is absent (under any casing); returns whether it added.
    bool insert(std::string key, Value value);
    bool erase(std::string_view key);

    // Defined below Value (a complete type there, as clang needs for the vector's members).
    std::size_t size() const;
    bool empty() const;
    auto begin() const { return m_entries.begin(); }
    auto end() const { return m_entries.end(); }
    auto begin() { return m_entries.begin(); }
    auto end() { return m_entries.end(); }
    const std::vector<Entry>& entries() const { return m_entries; }

private:
    std::ptrdiff_t index_of(std::string_view key) const;
    void rebuild_index();

    // Objects past k_index_threshold entries also keep folded key -> position, so lookups
    // in large documents stay O(1); small ones scan (cheaper than folding the key).
    static constexpr std::size_t k_index_threshold = 24;
    std::vector<Entry> m_entries;
    std::unordered_map<std::string, std::size_t> m_index;
};

class Value {
public:
    Value() = default;  // Null
    // Out of line: inlining the variant's copy trips GCC 12's -Wmaybe-uninitialized false
    // positive in callers that build values from initializer lists.
    Value(const Value& other);
    Value(Value&& other) noexcept;
    Value& operator=(const Value& other);
    Value& operator=(Value&& other) noexcept;
    ~Value();
    Value(std::nullptr_t) {}
    Value(bool boolean) : m_data(boolean) {}
    Value(double number) : m_data(number) {}
    template <typename T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) Value(T number)
        : m_data(static_cast<double>(number)) {}
    Value(std::string string) : m_data(std::move(string)) {}
    Value(std::string_view string) : m_data(std::string(string)) {}
    Value(const char* string) : m_data(std::string(string)) {}
    Value(Array array) : m_data(std::make_shared<Array>(std::move(array))) {}
    Value(Object object) : m_data(std::make_shared<Object>(std::move(object))) {}

    Kind kind() const { return static_cast<Kind>(m_data.index()); }
    bool is_null() const { return kind() == Kind::null; }
    bool is_boolean() const { return kind() == Kind::boolean; }
    bool is_number() const { return kind() == Kind::number; }
    bool is_string() const { return kind() == Kind::string; }
    bool is_array() const { return kind() == Kind::array; }
    bool is_object() const { return kind() == Kind::object; }
    // Null, Boolean, Number and String are primitives.
    bool is_primitive() const { return kind() <= Kind::string; }

    // Typed access; calling the wrong one is a programming error (std::bad_variant_access).
    bool as_boolean() const { return std::get<bool>(m_data); }
    double as_number() const { return std::get<double>(m_data); }
    const std::string& as_string() const { return std::get<std::string>(m_data); }
    const Array& as_array() const { return *std::get<std::shared_ptr<Array>>(m_data); }
    const Object& as_object() const { return *std::get<std::shared_ptr<Object>>(m_data); }
    // Copy on write: detaches a shared container before handing out a mutable reference.
    Array& mutable_array();
    Object& mutable_object();

    // Object member lookup (case-insensitive); nullptr when absent or not an object.
    const Value* get(std::string_view key) const;

    // True when both refer to the very same array/object container.
    bool same_container(const Value& other) const;

    // GitHub's coercions.
    bool truthy() const;
    // Null 0, false 0, true 1, String as JavaScript's Number(), Array/Object NaN.
    double to_number() const;
    // Null "", Boolean "true"/"false", Number via format_number, Array "Array", Object "Object".
    std::string to_display_string() const;

    // Structural equality (deep, case-sensitive strings, NaN unequal): for tests and
    // comparisons of documents, not the expression `==` operator.
    friend bool deep_equal(const Value& left, const Value& right);

private:
    std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>,
                 std::shared_ptr<Object>>
        m_data;
};

inline std::size_t Object::size() const {
    return m_entries.size();
}
inline bool Object::empty() const {
    return m_entries.empty();
}

// Number to string the way GitHub's expression engine does: at most 15 decimals, shortest
// round-trip digits, integers without ".0", "-0" as "0", exponents for 1e21 and above and
// below 1e-6 ("1e+21", "1e-7"), "NaN", "Infinity", "-Infinity".
std::string format_number(double number);

// JavaScript's Number(string): surrounding whitespace ignored, "" is 0, decimal with optional
// sign and exponent, 0x/0o/0b prefixes, [+-]Infinity; anything else is NaN.
double parse_number(std::string_view text);

// The case fold used for key lookup and string comparison (Unicode upper case per code
// point, except the dotless i, as GitHub does). Invalid UTF-8 bytes pass through.
std::string fold_case(std::string_view text);
bool equals_ignore_case(std::string_view left, std::string_view right);

// JSON text to a Value (simdjson). Errors are invalid_input with simdjson's reason. Duplicate
// keys: the later value wins.
common::Expected<Value> parse_json(std::string_view text);

enum class JsonStyle {
    compact,  // {"a":1,"b":[true]}
    pretty,   // two-space indent, "key": value; GitHub's toJSON form
};

// A Value to JSON text (nlohmann::ordered_json). Integral numbers print without a fraction,
// NaN and the infinities print as null, invalid UTF-8 is replaced with U+FFFD.
std::string to_json(const Value& value, JsonStyle style);

// The same conversion as a document, to embed a Value in a larger JSON output.
nlohmann::ordered_json to_ordered_json(const Value& value);
// From an already-built document (e.g. one assembled for a report); not a parser.
Value from_ordered_json(const nlohmann::ordered_json& document);

}  // namespace jobs
