#pragma once
// The `sandgate exec --json` document for a RunResult, and the UTF-8 repair it relies on.
// Other commands (workflow steps, the broker) embed the same object.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

// {"exit_code", "signal", "timed_out", "duration_ms", "stdout": {"text", "tail", "bytes",
//  "truncated"}, "stderr": {...}, "skip_markers", "tree_kill", "sandbox": {...}, "egress",
//  "error"}.
// "egress" only under --network allowlist: {"connections": [{"host", "port", "verdict"
// (allowed, refused, failed), "reason", "address", "bytes_out", "bytes_in", "duration_ms"}],
// "unrecorded"}.
// Every string is valid UTF-8 (invalid bytes replaced by U+FFFD).
nlohmann::ordered_json to_json(const RunResult& result);

// The "egress" member alone: {"connections": [...], "unrecorded"} (workflow step reports).
nlohmann::ordered_json to_json(const EgressReport& report);

// `text` with every ill-formed sequence replaced by U+FFFD (one per maximal ill-formed
// subpart, as Unicode recommends). Well-formed text comes back unchanged.
std::string valid_utf8(std::string_view text);

}  // namespace sandbox
