#pragma once
// sandbox::run: run one untrusted command to completion, bounded in time and output, and
// leave nothing of it behind. Every later part of sandgate (exec, workflow steps, the broker)
// ends here. This header is the contract; run.cpp drives it with spawn.hpp (fork/exec),
// capture.hpp (bounded output), cgroup.hpp and reaper.hpp (tree kill), environment.cpp and
// the wrap (wrap.hpp). result_json.hpp renders a RunResult as the `--json` document.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandbox/access/safe_access.hpp"
#include "sandbox/base.hpp"
#include "sandbox/egress/egress_rule.hpp"
#include "sandbox/process/cancel.hpp"

namespace sandbox {

class LoopbackNetns;  // netns.hpp

inline constexpr std::size_t k_default_output_limit = 262144;  // bytes kept per stream (head)
inline constexpr std::size_t k_tail_bytes = 64 * 1024;         // last bytes kept per stream
inline constexpr std::size_t k_max_stdin_bytes = 1'000'000;
inline constexpr std::chrono::milliseconds k_default_kill_grace{5000};
// RunResult::exit_status() of a cancelled run, as a shell reports an interrupted command.
inline constexpr int k_cancelled_exit_status = 130;
inline constexpr std::size_t k_max_output_limit = 64 * 1024 * 1024;  // larger is refused
// Once the tree is dead, output still unread is drained for at most this long (a process
// outside the tree that was handed the pipe cannot hold the run open).
inline constexpr std::chrono::milliseconds k_drain_deadline{2000};

enum class SandboxMode { off, bwrap, container };
enum class NetworkMode { none, host };
enum class Offline { automatic, on, off };  // automatic: on exactly when network is none
enum class TreeKill { cgroup, subreaper, pidns };
enum class Stream { out, err };
// automatic: a per-run cgroup v2 leaf when a writable cgroup2 is mounted, otherwise a per-run
// subreaper. never: always the subreaper (for tests, and callers that manage cgroups).
enum class CgroupUse { automatic, never };
// Who adopts the command's orphans when no cgroup holds the tree. per_run: a reaper process
// of the run's own (reaper.hpp), so that concurrent runs in one process stay apart. caller:
// the calling process made itself PR_SET_CHILD_SUBREAPER (make_caller_subreaper()) and runs
// one command at a time with no other child (the job-sandbox broker): run() signals the
// caller's own descendants and reaps every child of it, which spares a fork per run.
enum class Reaper { per_run, caller };

// NAME=VALUE pairs, in order; names unique.
using Environment = std::vector<std::pair<std::string, std::string>>;

enum class Access { read_only, writable };

// A host path shown at another path inside the wrap (the runner's container hooks mount the
// work directory at /__w, say). The destination must be absolute and outside the system
// directories; neither side may pass through a symlink.
struct Bind {
    std::filesystem::path source;
    std::filesystem::path destination;
    Access access = Access::read_only;
};

// The isolation posture of one run (issue 3). Defaults are the safe ones.
struct Policy {
    SandboxMode mode = SandboxMode::bwrap;
    NetworkMode network = NetworkMode::none;
    Offline offline = Offline::automatic;
    std::vector<std::filesystem::path> read_only;  // extra read-only binds
    std::vector<std::filesystem::path> writable;   // extra writable binds
    std::vector<std::filesystem::path> hide;       // masked with an empty tmpfs / /dev/null
    std::vector<Bind> binds;                       // host paths shown elsewhere inside
    // Kept on the host; otherwise the wrap's own: directories in its private /tmp tmpfs (a
    // per-run host temp root, removed afterwards, when toolchain_cache needs seeding).
    std::optional<std::filesystem::path> scratch;
    std::optional<std::filesystem::path> toolchain_cache;  // warm cache, bound read-only
    // bwrap arm: the hosted tool cache (tool_cache.hpp), bound read-only at
    // /opt/hostedtoolcache, RUNNER_TOOL_CACHE and AGENT_TOOLSDIRECTORY pointing there.
    std::optional<std::filesystem::path> tool_cache;
    std::optional<std::uint64_t> memory_bytes;  // unset: the wrap's default
    std::optional<std::uint64_t> pids;
    std::optional<std::uint64_t> tmp_size_bytes;
    // `--network allowlist` (with network none): the hosts the run's filtering proxy lets the
    // step reach (egress_rule.hpp, egress_proxy.hpp), the special ranges allowed names may
    // resolve into, and the proxy's limits. Enforced by the bwrap arm; the container arm and
    // --sandbox off refuse a non-empty list (never widened to the whole network).
    std::vector<EgressRule> egress;
    std::vector<EgressRange> egress_ranges;
    EgressLimits egress_limits;
    // bwrap arm, when sandgate runs as root: the unprivileged host uid/gid the sandbox runs as
    // (identity.hpp); unset: 65534:65534. Never root.
    std::optional<Owner> host_identity;
    std::string image;                        // container arm only
    std::filesystem::path container_runtime;  // container arm; empty: podman or docker on PATH
};

// Sees output as it arrives, for live streaming. Called on the thread that called run(),
// with chunks in arrival order; must not block for long (it stalls the drain).
class OutputObserver {
public:
    virtual ~OutputObserver() = default;
    virtual void on_output(Stream stream, std::string_view chunk) = 0;
};

struct RunRequest {
    std::vector<std::string> argv;  // argv[0] is looked up on PATH (execvp); never a shell string
    std::filesystem::path cwd;      // empty: the caller's working directory
    Environment env;                // exactly the child's environment: see child_environment()
    std::optional<std::string> stdin_text;  // at most k_max_stdin_bytes; otherwise /dev/null
    std::optional<std::chrono::milliseconds> timeout;  // unset: none
    std::chrono::milliseconds kill_grace = k_default_kill_grace;
    std::size_t output_limit = k_default_output_limit;
    Policy policy;
    OutputObserver* observer = nullptr;  // not owned; may be null
    CgroupUse cgroup = CgroupUse::automatic;
    Reaper reaper = Reaper::per_run;  // caller: see Reaper; never with concurrent runs
    // Not owned; may be null. When it fires (before or during the run) the tree is stopped as
    // on a timeout and the result's error is RunErrorKind::cancelled; nothing starts once it
    // has fired.
    const CancelToken* cancel = nullptr;
    // Not owned; may be null. A network namespace the caller started making early for this
    // run (netns.hpp), taken by the bwrap arm under --network none instead of making its own;
    // other postures leave it untaken.
    LoopbackNetns* early_netns = nullptr;
};

// What one output stream carried. head + tail is the whole stream exactly when !truncated.
struct StreamResult {
    std::string head;  // the first output_limit bytes, raw
    // The bytes after the head, at most the last k_tail_bytes of them (empty when the stream
    // fits in the head). Never overlaps the head.
    std::string tail;
    std::uint64_t bytes = 0;  // every byte the stream carried
    bool truncated = false;   // true when anything was dropped between head and tail
};

enum class RunErrorKind { timeout, spawn_failed, invalid_request, sandbox_unavailable, cancelled };

struct RunError {
    RunErrorKind kind = RunErrorKind::spawn_failed;
    std::string message;  // never contains the child's output
    int errno_value = 0;  // spawn_failed: the errno of the failed step (ENOENT -> exit 127)
};

struct RunResult {
    std::optional<int> exit_code;  // set when the child exited
    std::optional<int> signal;     // set when it died of a signal
    bool timed_out = false;
    std::chrono::milliseconds duration{0};
    StreamResult out;
    StreamResult err;
    std::uint64_t skip_markers = 0;            // lines containing SKIP-UNDER-WRAP, both streams
    TreeKill tree_kill = TreeKill::subreaper;  // the mechanism that was used
    // The posture: {"mode": "off"} or the wrap's description, for a run made in this process.
    // to_json embeds it as it is (no JSON parser involved, which keeps simdjson out of the
    // `sandgate` launcher). Null for a result decoded from a broker's or the API's answer: its
    // posture is the text in sandbox_json.
    nlohmann::ordered_json sandbox = nlohmann::ordered_json{{"mode", "off"}};
    // The posture as text where it arrived as text (a decoded result); empty otherwise, and
    // posture_text renders `sandbox` on demand (most runs never need the text).
    std::string sandbox_json;
    std::optional<RunError> error;
    // Under --network allowlist: every connection the step made through the proxy.
    std::optional<EgressReport> egress;

    // The exit status sandgate exec reports: the child's code; 128+N for signal N; 124 on
    // timeout; 125 when nothing ran (invalid request, sandbox refused); 126 not executable;
    // 127 not found.
    int exit_status() const;
};

// The run's posture as compact JSON text: sandbox_json when set, else `sandbox` rendered.
std::string posture_text(const RunResult& result);

// Runs the request and waits for the whole process tree to be gone. Always returns a
// RunResult: a refusal (invalid request, sandbox unavailable) or a spawn failure is recorded
// in result.error with nothing run, and a timeout is recorded as well (the child was killed).
// A non-zero exit is an outcome, not an error. Thread-safe: concurrent runs are independent
// (each has its own cgroup leaf or its own subreaper process; nothing process-wide such as
// PR_SET_CHILD_SUBREAPER or waitpid(-1) is touched in the calling process), except with
// Reaper::caller, which is for one run at a time in a process of its own. Memory stays
// bounded (head + tail per stream) whatever the output size.
RunResult run(const RunRequest& request);

// Makes the calling process the subreaper of everything it starts (PR_SET_CHILD_SUBREAPER),
// for Reaper::caller. Process-wide and permanent: only for a process that runs one command at
// a time and has no other children.
Expected<void> make_caller_subreaper();

// The environment a child gets: the fixed allowlist taken from `host` (PATH, LANG, LC_*,
// TERM, TZ and the like), then `pass` names copied from `host` when set, then `set` pairs,
// later entries winning. Never anything else of the agent's environment.
Environment child_environment(const Environment& host, const std::vector<std::string>& pass,
                              const Environment& set);

// The current process's environment as pairs.
Environment current_environment();

std::string_view to_string(SandboxMode mode);
std::string_view to_string(NetworkMode mode);
std::string_view to_string(TreeKill kill);
std::string_view to_string(RunErrorKind kind);

}  // namespace sandbox
