#include "sandbox/broker.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "sandbox/unix_socket.hpp"

namespace sandbox {
namespace {

constexpr std::chrono::seconds k_request_read_timeout{10};
constexpr std::chrono::seconds k_reply_margin{30};
constexpr int k_poll_interval_ms = 500;

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void send_refusal(int fd, Refusal refusal, std::string message) {
    BrokerReply reply;
    reply.refusal = refusal;
    reply.message = std::move(message);
    (void)write_frame(fd, encode_reply(reply));  // the peer may be gone; nothing to do then
}

// cwd inside root, with symlinks resolved as far as they exist: a cwd (or a symlink in it)
// that leads out of the root is a refusal.
Expected<std::filesystem::path> resolve_cwd(const std::filesystem::path& root,
                                            const std::string& cwd) {
    std::error_code ec;
    const auto base = std::filesystem::weakly_canonical(root, ec);
    if (ec) return fail(ErrorKind::invalid_input, root.string() + ": " + ec.message());
    const auto resolved = std::filesystem::weakly_canonical(root / cwd, ec);
    if (ec) return fail(ErrorKind::invalid_input, "cwd '" + cwd + "': " + ec.message());
    const auto relative = resolved.lexically_relative(base);
    if (relative.empty() || *relative.begin() == "..")
        return fail(ErrorKind::invalid_input, "cwd '" + cwd + "' is outside the sandbox root");
    return resolved;
}

Environment merged_env(const Environment& base, const Environment& set) {
    Environment env = base;
    for (const auto& [name, value] : set) {
        bool replaced = false;
        for (auto& pair : env)
            if (pair.first == name) {
                pair.second = value;
                replaced = true;
            }
        if (!replaced) env.emplace_back(name, value);
    }
    return env;
}

// One step at a time, on one worker thread that lives as long as the server: the listening
// thread stays free to refuse a concurrent request as busy, and no thread is made per step.
class Server {
public:
    explicit Server(const BrokerConfig& config) : m_config(config) {
        // The broker is the subreaper of its steps when its namespace dies with it (the first
        // process under the wrap's init, which exits when we do): every orphan of a step comes
        // back to it and is swept when the step ends, without a reaper process forked per step.
        // Elsewhere each step keeps its own reaper, which also kills the tree if we die.
        if (config.reaper == StepReaper::broker) {
            if (::getppid() != 1)
                spdlog::warn("broker {}: not under a pid namespace's init; a reaper per step",
                             config.identity);
            else if (auto ok = make_caller_subreaper(); !ok)
                spdlog::warn("broker {}: {}; a reaper per step", config.identity, ok.error().message);
            else
                m_reaper = Reaper::caller;
        }
        m_worker = std::thread([this] { work(); });
    }
    ~Server() {
        {
            std::lock_guard lock(m_mutex);
            m_quit = true;
        }
        m_wake.notify_all();
        // A step still running is abandoned on shutdown: the process exits next, and with it
        // the pid namespace and every process of the sandbox.
        if (m_abandon) m_worker.detach();
        else m_worker.join();
    }

    Expected<void> serve() {
        auto listener = listen_unix(m_config.socket);
        if (!listener) return std::unexpected(listener.error());
        spdlog::info("broker {}: listening on {} (steps reaped by {})", m_config.identity,
                     m_config.socket.string(),
                     m_reaper == Reaper::caller ? "the broker" : "a reaper per step");
        while (!m_stop) {
            pollfd item{listener->get(), POLLIN, 0};
            const int ready = ::poll(&item, 1, k_poll_interval_ms);
            if (ready < 0 && errno != EINTR) return fail(ErrorKind::permanent, errno_message("poll"));
            if (ready <= 0) continue;
            Fd connection(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (!connection) continue;
            handle(std::move(connection));
        }
        return {};
    }

private:
    struct Step {
        Fd connection;
        RunRequest run;
    };

    void handle(Fd connection) {
        auto peer = peer_credentials(connection.get());
        if (!peer || peer->uid != ::geteuid()) {
            spdlog::warn("broker {}: dropped a connection from another uid", m_config.identity);
            return;
        }
        const auto deadline = std::chrono::steady_clock::now() + k_request_read_timeout;
        auto frame = read_frame(connection.get(), k_max_request_frame, deadline);
        if (!frame) return send_refusal(connection.get(), Refusal::invalid, frame.error().message);
        auto request = parse_request(*frame);
        if (!request) return send_refusal(connection.get(), Refusal::invalid, request.error().message);
        switch (request->op) {
            case BrokerOp::ping: return reply_status(connection.get());
            case BrokerOp::shutdown: return shutdown(connection.get(), request->exec.identity);
            case BrokerOp::exec: return exec(std::move(connection), std::move(request->exec));
        }
    }

    void reply_status(int fd) {
        BrokerReply reply;
        BrokerStatus status;
        status.identity = m_config.identity;
        status.busy = m_busy;
        status.expires_at_ms = m_config.expires_at_ms;
        status.pid = ::getpid();
        std::error_code ec;
        status.pid_namespace = std::filesystem::read_symlink("/proc/self/ns/pid", ec).string();
        status.reaper = m_reaper == Reaper::caller ? "broker" : "per_step";
        reply.status = std::move(status);
        (void)write_frame(fd, encode_reply(reply));
    }

    void shutdown(int fd, const std::string& identity) {
        if (identity != m_config.identity)
            return send_refusal(fd, Refusal::identity, "identity does not match this sandbox");
        m_stop = true;
        m_abandon = m_busy.load();
        (void)write_frame(fd, encode_reply(BrokerReply{}));
    }

    void exec(Fd connection, ExecRequest request) {
        if (request.identity != m_config.identity)
            return send_refusal(connection.get(), Refusal::identity,
                                "identity does not match this sandbox");
        const auto left = m_config.expires_at_ms - now_ms();
        if (left <= 0) return send_refusal(connection.get(), Refusal::expired, "sandbox expired");
        if (m_busy) return send_refusal(connection.get(), Refusal::busy,
                                        "another command is running in this sandbox");
        auto cwd = resolve_cwd(m_config.root, request.cwd);
        if (!cwd) return send_refusal(connection.get(), Refusal::invalid, cwd.error().message);
        Step step{std::move(connection), {}};
        RunRequest& run = step.run;
        run.argv = request.shell ? shell_argv(*request.shell) : std::move(request.argv);
        run.cwd = *cwd;
        run.env = merged_env(m_config.base_env, request.env);
        run.stdin_text = std::move(request.stdin_text);
        // Never past the sandbox's expiry.
        run.timeout = std::chrono::milliseconds(left);
        if (request.timeout && *request.timeout < *run.timeout) run.timeout = request.timeout;
        run.output_limit = request.output_limit;
        run.policy.mode = SandboxMode::off;  // already inside the wrap
        run.reaper = m_reaper;
        m_busy = true;
        {
            std::lock_guard lock(m_mutex);
            m_step = std::move(step);
        }
        m_wake.notify_one();
    }

    void work() {
        for (;;) {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [&] { return m_quit || m_step; });
            if (!m_step) return;  // quit with nothing to run
            Step step = std::move(*m_step);
            m_step.reset();
            lock.unlock();
            execute(std::move(step.connection), step.run);
        }
    }

    void execute(Fd connection, const RunRequest& run) {
        BrokerReply reply;
        reply.result = m_config.runner ? m_config.runner(run) : sandbox::run(run);
        const auto& result = *reply.result;
        spdlog::info("broker {}: {} exited {} in {} ms, out {} B, err {} B", m_config.identity,
                     run.argv.empty() ? "" : run.argv.front(), result.exit_status(),
                     result.duration.count(), result.out.bytes, result.err.bytes);
        // Busy ends before the reply goes out, so the next step the client sends after reading
        // it is never refused for a step that has finished.
        m_busy = false;
        (void)write_frame(connection.get(), encode_reply(reply));
    }

    const BrokerConfig& m_config;
    Reaper m_reaper = Reaper::per_run;
    std::atomic<bool> m_busy{false};
    bool m_stop = false;
    bool m_abandon = false;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::optional<Step> m_step;  // handed from the listening thread to the worker
    bool m_quit = false;
    std::thread m_worker;  // last: started once everything above exists
};

}  // namespace

std::vector<std::string> shell_argv(const std::string& script) {
    return {"bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script};
}

Expected<void> serve_broker(const BrokerConfig& config) {
    if (config.identity.empty()) return fail(ErrorKind::invalid_input, "broker: empty identity");
    if (!config.root.is_absolute())
        return fail(ErrorKind::invalid_input, "broker: --root must be an absolute path");
    Server server(config);
    return server.serve();
}

Expected<BrokerReply> broker_call(const std::filesystem::path& socket,
                                  const BrokerRequest& request,
                                  std::optional<std::chrono::milliseconds> wait,
                                  PeerCredentials* peer) {
    auto connection = connect_unix(socket);
    if (!connection) return std::unexpected(connection.error());
    auto credentials = peer_credentials(connection->get());
    if (!credentials) return std::unexpected(credentials.error());
    if (credentials->uid != ::geteuid())
        return fail(ErrorKind::permanent, socket.string() + ": the broker runs as another uid");
    if (peer) *peer = *credentials;
    if (auto ok = write_frame(connection->get(), encode_request(request)); !ok)
        return std::unexpected(ok.error());
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (wait) deadline = std::chrono::steady_clock::now() + *wait;
    else if (request.op != BrokerOp::exec)
        deadline = std::chrono::steady_clock::now() + k_request_read_timeout;
    else if (request.exec.timeout)
        deadline = std::chrono::steady_clock::now() + *request.exec.timeout + k_reply_margin;
    auto frame = read_frame(connection->get(), k_max_reply_frame, deadline);
    if (!frame) return std::unexpected(frame.error());
    return parse_reply(*frame);
}

}  // namespace sandbox
