#pragma once
// The job-sandbox broker: a small server that runs inside one long-lived wrap (started once
// per job by bwrap) and executes each step it is sent with sandbox::run in mode off, so that
// the steps of a job share one set of namespaces (its /tmp, its pid namespace, its network
// posture) and pay bwrap's start-up once. It knows nothing of GitHub or jobs: the identity is
// an opaque string chosen by whoever started it.
//
// Server contract (serve_broker):
// - listens on `socket` (0600, in a 0700 directory of ours); each connection is checked with
//   SO_PEERCRED (same uid as the broker, or root, else dropped) and carries one request;
// - one command at a time: an exec arriving while another runs is refused `busy`;
// - an exec whose identity differs is refused `identity`; after expires_at, `expired`;
//   a cwd outside `root`, a bad field, stdin over the limit: `invalid`. A refused request
//   runs nothing;
// - each step's process tree is gone when its reply is sent (run()'s tree kill): what carries
//   over between steps is the filesystem (/tmp, the root) and the namespaces, not processes;
// - stdin_text is never logged nor echoed; logs carry the identity, argv[0], exit and sizes.
// - a client that shuts its connection down (shutdown(SHUT_WR), or closes it) while its step
//   runs cancels the step: SIGTERM to its tree, SIGKILL after the request's kill grace, and
//   the answer (to a half-closed connection) is a RunResult with RunErrorKind::cancelled;
// - two threads accept: one runs a step while the other answers pings and refuses `busy`;
// - returns on `shutdown` (same identity) or when the listening socket fails; a step still
//   running then is stopped as on a timeout (SIGTERM, SIGKILL after the grace) and answered
//   with RunErrorKind::cancelled.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/unix_socket.hpp"
#include "sandbox/base.hpp"
#include "sandbox/broker/broker_protocol.hpp"
#include "sandbox/process/cancel.hpp"

namespace sandbox {

// Who reaps a step's orphans. per_step: a reaper process forked for each step (it also kills
// the tree if the broker dies). broker: the broker itself, as PR_SET_CHILD_SUBREAPER, which
// saves a fork per step; only where nothing can outlive the broker: it must be the first
// process under a pid namespace's init that exits with it (bwrap --unshare-pid); elsewhere
// (the parent is not pid 1) the broker says so in its log and keeps per_step.
enum class StepReaper { per_step, broker };

struct BrokerConfig {
    std::filesystem::path socket;
    std::string identity;
    std::int64_t expires_at_ms = 0;  // wall clock, ms since the epoch
    std::filesystem::path root;      // cwd of requests resolves inside it
    Environment base_env;            // the allowlisted environment steps start from
    StepReaper reaper = StepReaper::per_step;
    // Runs one request; sandbox::run with policy mode off by default. Replaceable for tests.
    std::function<RunResult(const RunRequest&)> runner;
};

Expected<void> serve_broker(const BrokerConfig& config);

// Client side. Each call is one connection. The peer must run as our uid (root: or own the socket's
// 0700 dir in a dir of root's: the sandbox identity), its credentials in *peer when asked. `wait`
// bounds the wait for the reply (nullopt: the request's timeout plus a margin; no bound for an exec
// without a timeout). `cancel` (not owned; may be null): when it fires before the reply starts, the
// connection's sending side is shut down, which cancels the step, and the call still waits (for the
// kill grace plus a margin) for the broker's answer, a result with RunErrorKind::cancelled.
// `output` (not owned; may be null) is given the output frames of a streamed exec
// (ExecRequest::output_frames), on the calling thread, as they arrive; the reply returned is
// the one after them.
Expected<BrokerReply> broker_call(const std::filesystem::path& socket, const BrokerRequest& request,
                                  std::optional<std::chrono::milliseconds> wait = std::nullopt,
                                  common::PeerCredentials* peer = nullptr,
                                  const CancelToken* cancel = nullptr,
                                  OutputObserver* output = nullptr);

// The argv a shell request runs: bash --noprofile --norc -eo pipefail -c SCRIPT.
std::vector<std::string> shell_argv(const std::string& script);

}  // namespace sandbox
