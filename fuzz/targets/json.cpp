// JSON documents (fromJSON, `--contexts`, the event payload): parse_json and back.
#include "fuzz/fuzz_target.hpp"
#include "jobs/expr/value.hpp"

SANDGATE_FUZZ_TARGET(json) {
    auto value = jobs::parse_json(fuzz::text(data, size));
    if (!value) {
        fuzz::check(!value.error().message.empty(), "a refusal has a message");
        return 0;
    }
    const std::string compact = jobs::to_json(*value, jobs::JsonStyle::compact);
    auto again = jobs::parse_json(compact);
    fuzz::check(again.has_value(), "what to_json writes parses");
    return 0;
}
