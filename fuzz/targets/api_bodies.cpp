// The bodies the agent's API and its job-sandbox broker read: a submitted job, a sandbox's
// identity, an exec request, and the broker protocol's requests, replies and run results
// (the broker runs inside the wrap: what it answers is hostile). The first byte picks the
// reader, the rest is its input.
#include "agent/api/api_bodies.hpp"

#include <simdjson.h>

#include "agent/sandboxes/sandbox_records.hpp"
#include "fuzz/fuzz_target.hpp"
#include "sandbox/broker/broker_protocol.hpp"

SANDGATE_FUZZ_TARGET(api_bodies) {
    if (size == 0) return 0;
    const std::string_view input = fuzz::text(data + 1, size - 1);
    switch (data[0] % 7) {
        case 0:
            if (auto spec = agent::read_job_submission(input); !spec)
                fuzz::check_one_line(spec.error());
            break;
        case 1: {
            simdjson::dom::parser parser;
            simdjson::dom::element doc;
            if (parser.parse(simdjson::padded_string(input)).get(doc) == simdjson::SUCCESS) {
                std::string error;
                if (!agent::parse_identity(doc, &error)) fuzz::check_one_line(error);
            }
            break;
        }
        case 2:
            (void)sandbox::parse_exec_object(input);
            break;
        case 3:
            if (auto request = sandbox::parse_request(input))
                (void)sandbox::encode_request(*request);
            break;
        case 4:
            if (auto reply = sandbox::parse_reply(input)) (void)sandbox::encode_reply(*reply);
            break;
        case 5:
            if (auto result = sandbox::decode_run_result(input))
                (void)sandbox::encode_run_result(*result);
            break;
        case 6:
            (void)sandbox::base64_decode(input);
            break;
    }
    return 0;
}
