#include "sandbox/process/result_json.hpp"

namespace sandbox {
namespace {

// Length of the well-formed UTF-8 sequence at text[i], or 0 when ill-formed there; `*bad`
// gets the length of the maximal ill-formed subpart to replace (Unicode Table 3-7).
std::size_t sequence_length(std::string_view text, std::size_t i, std::size_t* bad) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    std::size_t need = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        need = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        need = 2;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;  // no surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        need = 3;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    for (std::size_t k = 1; k <= need; ++k) {
        if (i + k >= text.size() || byte(i + k) < low || byte(i + k) > high) {
            *bad = k;
            return 0;
        }
        low = 0x80;
        high = 0xBF;
    }
    return need + 1;
}

nlohmann::ordered_json stream_json(const StreamResult& stream) {
    nlohmann::ordered_json out;
    out["text"] = valid_utf8(stream.head);
    out["tail"] = valid_utf8(stream.tail);
    out["bytes"] = stream.bytes;
    out["truncated"] = stream.truncated;
    return out;
}

}  // namespace

nlohmann::ordered_json to_json(const EgressReport& report) {
    nlohmann::ordered_json connections = nlohmann::ordered_json::array();
    for (const auto& c : report.connections) {
        nlohmann::ordered_json one;
        one["host"] = valid_utf8(c.host);
        one["port"] = c.port;
        one["verdict"] = to_string(c.verdict);
        one["reason"] = valid_utf8(c.reason);
        one["address"] =
            c.address.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.address);
        one["bytes_out"] = c.bytes_out;
        one["bytes_in"] = c.bytes_in;
        one["duration_ms"] = c.duration.count();
        connections.push_back(std::move(one));
    }
    return {{"connections", std::move(connections)}, {"unrecorded", report.unrecorded}};
}

std::string valid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        if (static_cast<unsigned char>(text[i]) < 0x80) {
            const std::size_t start = i;
            while (i < text.size() && static_cast<unsigned char>(text[i]) < 0x80) ++i;
            out.append(text.substr(start, i - start));
            continue;
        }
        std::size_t bad = 0;
        const std::size_t length = sequence_length(text, i, &bad);
        if (length > 0) {
            out.append(text.substr(i, length));
            i += length;
        } else {
            out.append("\xEF\xBF\xBD");
            i += bad;
        }
    }
    return out;
}

nlohmann::ordered_json to_json(const RunResult& result) {
    nlohmann::ordered_json doc;
    doc["exit_code"] = result.exit_code ? nlohmann::ordered_json(*result.exit_code) : nullptr;
    doc["signal"] = result.signal ? nlohmann::ordered_json(*result.signal) : nullptr;
    doc["timed_out"] = result.timed_out;
    doc["duration_ms"] = result.duration.count();
    doc["stdout"] = stream_json(result.out);
    doc["stderr"] = stream_json(result.err);
    doc["skip_markers"] = result.skip_markers;
    doc["tree_kill"] = to_string(result.tree_kill);
    doc["sandbox"] = result.sandbox;
    if (result.egress) doc["egress"] = to_json(*result.egress);
    if (result.error) {
        doc["error"] = {{"kind", to_string(result.error->kind)},
                        {"message", valid_utf8(result.error->message)}};
    } else {
        doc["error"] = nullptr;
    }
    return doc;
}

}  // namespace sandbox
