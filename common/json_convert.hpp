#pragma once
// Turns JSON text into an nlohmann::ordered_json value for embedding in an emitted document,
// parsing it with simdjson (the project's one JSON parser). Key order is kept.

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/error.hpp"

namespace common {

Expected<nlohmann::ordered_json> to_ordered_json(std::string_view text);

// As above; a value that does not parse becomes null (for stored documents we wrote).
nlohmann::ordered_json to_ordered_json_or_null(std::string_view text);

}  // namespace common
