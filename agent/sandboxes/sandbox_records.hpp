#pragma once
// The records a job sandbox leaves on its job (and in its meta.json): value-free by contract,
// identity, posture, limits, env NAMES, durations, exit, byte counts, truncation, skip markers;
// never env values, argv or stdin.

#include <simdjson.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/sandboxes/sandbox_manager.hpp"
#include "sandbox/broker/broker_protocol.hpp"
#include "sandbox/process/run.hpp"

namespace agent {

nlohmann::ordered_json identity_json(const SandboxIdentity& identity);

// The "identity" object of `doc` (an API body or answer): repository, sha and job_id non-empty
// strings, run_id and attempt integers when present (SandboxIdentity's defaults otherwise).
// nullopt with *error set to a one-line message naming the field when malformed.
std::optional<SandboxIdentity> parse_identity(simdjson::dom::element doc, std::string* error);

// The sandbox's policy as recorded before the sandbox exists: mode, network, paths, limits,
// TTL and the env names the steps will get.
std::string sandbox_policy_json(const sandbox::Policy& policy, const SandboxOptions& options);

// One exec's evidence: its kind (argv or shell), and the refusal or the result's facts.
// How the exec named its program: an argv, or a script for the shell.
enum class ExecForm { argv, shell };
nlohmann::ordered_json exec_evidence(const std::string& id, const SandboxIdentity& identity,
                                     ExecForm form, const sandbox::BrokerReply& reply);

// An exec refused before it reached the broker (identity, busy, not ready, expired).
nlohmann::ordered_json refusal_evidence(const std::string& id, const SandboxIdentity& identity,
                                        sandbox::Refusal refusal, const std::string& message);

}  // namespace agent
