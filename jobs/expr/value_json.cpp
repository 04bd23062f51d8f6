// JSON text <-> Value: simdjson (on demand) parses, nlohmann::ordered_json emits.
#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "jobs/expr/value.hpp"

namespace jobs {
namespace {

using simdjson::ondemand::json_type;

// The on-demand API, because its get_double() takes any JSON number (the DOM refuses
// integers beyond 64 bits, which JavaScript's JSON.parse accepts as doubles). On demand does
// not bound nesting itself (a document 100,000 deep would recurse as deep): the conversion
// counts it and refuses what is deeper than k_max_json_depth.
// Below the parser's own max depth (1024), which on demand asserts rather than checks.
constexpr int k_max_json_depth = 512;

common::Expected<Value> from_value(simdjson::ondemand::value value, int depth);

std::unexpected<common::Error> json_error(simdjson::error_code error) {
    return common::fail(common::ErrorKind::invalid_input,
                        std::string("invalid JSON: ") + simdjson::error_message(error));
}

std::unexpected<common::Error> too_deep() {
    return common::fail(
        common::ErrorKind::invalid_input,
        "invalid JSON: nested more than " + std::to_string(k_max_json_depth) + " deep");
}

common::Expected<Value> from_array(simdjson::ondemand::array items, int depth) {
    Array array;
    for (auto item : items) {
        simdjson::ondemand::value element;
        if (auto error = item.get(element)) return json_error(error);
        auto converted = from_value(element, depth);
        if (!converted) return converted;
        array.push_back(std::move(*converted));
    }
    return Value(std::move(array));
}

common::Expected<Value> from_object(simdjson::ondemand::object fields, int depth) {
    Object object;
    for (auto field : fields) {
        std::string_view key;
        if (auto error = field.unescaped_key().get(key)) return json_error(error);
        std::string owned_key(key);  // the view lives only until the parser moves on
        simdjson::ondemand::value element;
        if (auto error = field.value().get(element)) return json_error(error);
        auto converted = from_value(element, depth);
        if (!converted) return converted;
        object.set(std::move(owned_key), std::move(*converted));
    }
    return Value(std::move(object));
}

// Scalars and containers alike; `Source` is an on-demand value or the document itself (a
// scalar document cannot be taken as a value).
template <typename Source>
common::Expected<Value> convert(Source& source, int depth) {
    json_type type;
    if (auto error = source.type().get(type)) return json_error(error);
    switch (type) {
        case json_type::array: {
            if (depth >= k_max_json_depth) return too_deep();
            simdjson::ondemand::array items;
            if (auto error = source.get_array().get(items)) return json_error(error);
            return from_array(items, depth + 1);
        }
        case json_type::object: {
            if (depth >= k_max_json_depth) return too_deep();
            simdjson::ondemand::object fields;
            if (auto error = source.get_object().get(fields)) return json_error(error);
            return from_object(fields, depth + 1);
        }
        case json_type::number: {
            double number = 0;
            if (auto error = source.get_double().get(number)) return json_error(error);
            return Value(number);
        }
        case json_type::string: {
            std::string_view text;
            if (auto error = source.get_string().get(text)) return json_error(error);
            return Value(std::string(text));
        }
        case json_type::boolean: {
            bool boolean = false;
            if (auto error = source.get_bool().get(boolean)) return json_error(error);
            return Value(boolean);
        }
        case json_type::null: {
            bool is_null = false;
            if (auto error = source.is_null().get(is_null)) return json_error(error);
            if (!is_null) return json_error(simdjson::N_ATOM_ERROR);
            return Value();
        }
    }
    return json_error(simdjson::INCORRECT_TYPE);
}

common::Expected<Value> from_value(simdjson::ondemand::value value, int depth) {
    return convert(value, depth);
}

}  // namespace

common::Expected<Value> parse_json(std::string_view text) {
    simdjson::ondemand::parser parser;
    // simdjson needs SIMDJSON_PADDING readable bytes past the end: padded_string copies.
    const simdjson::padded_string padded(text);
    simdjson::ondemand::document document;
    if (auto error = parser.iterate(padded).get(document)) return json_error(error);
    auto value = convert(document, 0);
    if (!value) return value;
    // On demand reads lazily: trailing content is only found by asking.
    // (current_location() reports OUT_OF_BOUNDS exactly when everything was consumed.)
    if (document.current_location().error() != simdjson::OUT_OF_BOUNDS) {
        return json_error(simdjson::TRAILING_CONTENT);
    }
    return value;
}

nlohmann::ordered_json to_ordered_json(const Value& value) {
    switch (value.kind()) {
        case Kind::null:
            return nullptr;
        case Kind::boolean:
            return value.as_boolean();
        case Kind::number: {
            const double number = value.as_number();
            // Integral values print as integers ("1", not "1.0"); -0 prints as 0 like
            // JSON.stringify. 2^53 bounds the integers a double holds exactly.
            if (std::isfinite(number) && std::trunc(number) == number &&
                std::fabs(number) < 9007199254740992.0) {
                return static_cast<std::int64_t>(number);
            }
            // Larger integers print as JavaScript does (shortest digits, zero padded:
            // 2^60 is 1152921504606847000), which 64-bit integers can carry up to 9.2e18.
            if (std::isfinite(number) && std::trunc(number) == number &&
                std::fabs(number) < 9.2e18) {
                const std::string digits = format_number(std::fabs(number));
                std::int64_t magnitude = 0;
                const auto [end, ec] =
                    std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
                if (ec == std::errc() && end == digits.data() + digits.size()) {
                    return number < 0 ? -magnitude : magnitude;
                }
            }
            return number;  // NaN and the infinities dump as null
        }
        case Kind::string:
            return value.as_string();
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
        case nlohmann::ordered_json::value_t::discarded:
            return Value();
        case nlohmann::ordered_json::value_t::boolean:
            return Value(document.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
        case nlohmann::ordered_json::value_t::number_unsigned:
        case nlohmann::ordered_json::value_t::number_float:
            return Value(document.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value(document.get<std::string>());
        case nlohmann::ordered_json::value_t::binary:
            return Value();
        case nlohmann::ordered_json::value_t::array: {
            Array array;
            for (const auto& item : document) array.push_back(from_ordered_json(item));
            return Value(std::move(array));
        }
        case nlohmann::ordered_json::value_t::object: {
            Object object;
            for (const auto& [key, item] : document.items())
                object.set(key, from_ordered_json(item));
            return Value(std::move(object));
        }
    }
    return Value();
}

std::string to_json(const Value& value, JsonStyle style) {
    const int indent = style == JsonStyle::pretty ? 2 : -1;
    return to_ordered_json(value).dump(indent, ' ', false,
                                       nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace jobs
