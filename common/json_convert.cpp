#include "common/json_convert.hpp"

#include <simdjson.h>

namespace common {
namespace {

nlohmann::ordered_json convert(simdjson::dom::element element) {
    using Type = simdjson::dom::element_type;
    switch (element.type()) {
        case Type::ARRAY: {
            auto out = nlohmann::ordered_json::array();
            simdjson::dom::array items;
            if (element.get(items) != simdjson::SUCCESS) return out;
            for (auto item : items) out.push_back(convert(item));
            return out;
        }
        case Type::OBJECT: {
            auto out = nlohmann::ordered_json::object();
            simdjson::dom::object fields;
            if (element.get(fields) != simdjson::SUCCESS) return out;
            for (auto [key, value] : fields) out[std::string(key)] = convert(value);
            return out;
        }
        case Type::INT64:
            return element.get_int64().value_unsafe();
        case Type::UINT64:
            return element.get_uint64().value_unsafe();
        case Type::DOUBLE:
            return element.get_double().value_unsafe();
        case Type::STRING:
            return std::string(element.get_string().value_unsafe());
        case Type::BOOL:
            return element.get_bool().value_unsafe();
        case Type::NULL_VALUE:
            return nullptr;
    }
    return nullptr;
}

}  // namespace

Expected<nlohmann::ordered_json> to_ordered_json(std::string_view text) {
    simdjson::dom::parser parser;
    simdjson::dom::element element;
    if (auto error = parser.parse(simdjson::padded_string(text)).get(element); error)
        return fail(ErrorKind::invalid_input,
                    std::string("not JSON: ") + simdjson::error_message(error));
    return convert(element);
}

nlohmann::ordered_json to_ordered_json_or_null(std::string_view text) {
    auto value = to_ordered_json(text);
    return value ? std::move(*value) : nlohmann::ordered_json(nullptr);
}

}  // namespace common
