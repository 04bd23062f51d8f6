// JSON text <-> Value: simdjson parses, nlohmann::ordered_json emits.
#include <simdjson.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "jobs/value.hpp"

namespace jobs {
namespace {

// simdjson's DOM nests by recursion, bounded by its max depth (1024 by default).
Value from_element(simdjson::dom::element element) {
    switch (element.type()) {
        case simdjson::dom::element_type::ARRAY: {
            const simdjson::dom::array items = element.get_array().value_unsafe();
            Array array;
            array.reserve(items.size());
            for (auto item : items) array.push_back(from_element(item));
            return Value(std::move(array));
        }
        case simdjson::dom::element_type::OBJECT: {
            const simdjson::dom::object fields = element.get_object().value_unsafe();
            Object object;
            for (auto field : fields) {
                object.set(std::string(field.key), from_element(field.value));
            }
            return Value(std::move(object));
        }
        case simdjson::dom::element_type::INT64:
            return Value(static_cast<double>(element.get_int64().value_unsafe()));
        case simdjson::dom::element_type::UINT64:
            return Value(static_cast<double>(element.get_uint64().value_unsafe()));
        case simdjson::dom::element_type::DOUBLE:
            return Value(element.get_double().value_unsafe());
        case simdjson::dom::element_type::STRING:
            return Value(std::string(element.get_string().value_unsafe()));
        case simdjson::dom::element_type::BOOL:
            return Value(element.get_bool().value_unsafe());
        case simdjson::dom::element_type::NULL_VALUE:
            return Value();
    }
    return Value();
}

}  // namespace

sandbox::Expected<Value> parse_json(std::string_view text) {
    simdjson::dom::parser parser;
    // simdjson needs SIMDJSON_PADDING readable bytes past the end: padded_string copies.
    const simdjson::padded_string padded(text);
    simdjson::dom::element root;
    if (auto error = parser.parse(padded).get(root); error != simdjson::SUCCESS) {
        return sandbox::fail(sandbox::ErrorKind::invalid_input,
                             std::string("invalid JSON: ") + simdjson::error_message(error));
    }
    return from_element(root);
}

nlohmann::ordered_json to_ordered_json(const Value& value) {
    switch (value.kind()) {
        case Kind::null: return nullptr;
        case Kind::boolean: return value.as_boolean();
        case Kind::number: {
            const double number = value.as_number();
            // Integral values print as integers ("1", not "1.0"); -0 prints as 0 like
            // JSON.stringify. 2^53 bounds the integers a double holds exactly.
            if (std::isfinite(number) && std::trunc(number) == number && std::fabs(number) < 9007199254740992.0) {
                return static_cast<std::int64_t>(number);
            }
            return number;  // NaN and the infinities dump as null
        }
        case Kind::string: return value.as_string();
        case Kind::array: {
            auto array = nlohmann::ordered_json::array();
            for (const auto& item : value.as_array()) array.push_back(to_ordered_json(item));
            return array;
        }
        case Kind::object: {
            auto object = nlohmann::ordered_json::object();
            for (const auto& [key, item] : value.as_object()) object[key] = to_ordered_json(item);
            return object;
        }
    }
    return nullptr;
}

Value from_ordered_json(const nlohmann::ordered_json& document) {
    switch (document.type()) {
        case nlohmann::ordered_json::value_t::null:
        case nlohmann::ordered_json::value_t::discarded: return Value();
        case nlohmann::ordered_json::value_t::boolean: return Value(document.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
        case nlohmann::ordered_json::value_t::number_unsigned:
        case nlohmann::ordered_json::value_t::number_float: return Value(document.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value(document.get<std::string>());
        case nlohmann::ordered_json::value_t::binary: return Value();
        case nlohmann::ordered_json::value_t::array: {
            Array array;
            for (const auto& item : document) array.push_back(from_ordered_json(item));
            return Value(std::move(array));
        }
        case nlohmann::ordered_json::value_t::object: {
            Object object;
            for (const auto& [key, item] : document.items()) object.set(key, from_ordered_json(item));
            return Value(std::move(object));
        }
    }
    return Value();
}

std::string to_json(const Value& value, JsonStyle style) {
    const int indent = style == JsonStyle::pretty ? 2 : -1;
    return to_ordered_json(value).dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace jobs
