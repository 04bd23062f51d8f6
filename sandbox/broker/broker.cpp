#include "sandbox/broker/broker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "common/unix_socket.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/process/cancel.hpp"
#include "sandbox/wrap/payload_status.hpp"

namespace sandbox {
namespace {

// The uid an unmapped uid shows as in this user namespace (/proc/sys/kernel/overflowuid), when
// this process is in a user namespace other than the initial one; nullopt otherwise.
std::optional<uid_t> unmapped_uid() {
    const auto read_small = [](const char* path) {
        std::string text;
        const int fd = ::open(path, O_RDONLY | O_CLOEXEC);  // trusted path: /proc
        char buffer[256];
        ssize_t got = 0;
        while (fd >= 0 && (got = ::read(fd, buffer, sizeof buffer)) > 0 && text.size() < 4096)
            text.append(buffer, static_cast<std::size_t>(got));
        if (fd >= 0) ::close(fd);
        return text;
    };
    const std::string map = read_small("/proc/self/uid_map");
    if (map.find("4294967295") != std::string::npos) return std::nullopt;  // the initial namespace
    const std::string overflow = read_small("/proc/sys/kernel/overflowuid");
    uid_t uid = 65534;
    std::from_chars(overflow.data(), overflow.data() + overflow.size(), uid);
    return uid;
}

// A client the broker serves: its own uid, or root. As root, sandgate runs the broker under
// the sandbox's unprivileged host identity (sandbox/wrap/identity.hpp) and calls it as root, which
// the sandbox's user namespace does not map: root shows as the overflow uid there. The socket
// lies in root's own 0700 sandbox directory, so no other host uid reaches it to show as that.
bool trusted_client(const common::PeerCredentials& peer) {
    static const std::optional<uid_t> unmapped = unmapped_uid();
    return peer.uid == ::geteuid() || peer.uid == 0 || (unmapped && peer.uid == *unmapped);
}

// A broker the client trusts: one of its own uid, or, for root, one running as the owner of
// the socket's directory: a directory only root could have given to that uid (the sandbox's
// host identity, which the broker runs as), inside root's own 0700 sandbox directory.
bool trusted_broker(const common::PeerCredentials& peer, const std::filesystem::path& socket) {
    if (peer.uid == ::geteuid()) return true;
    if (::geteuid() != 0) return false;
    struct stat dir {
    }, parent{};
    return ::lstat(socket.parent_path().c_str(), &dir) == 0 && S_ISDIR(dir.st_mode) &&
           dir.st_uid == peer.uid && (dir.st_mode & 077) == 0 &&
           ::lstat(socket.parent_path().parent_path().c_str(), &parent) == 0 &&
           S_ISDIR(parent.st_mode) && parent.st_uid == 0 && (parent.st_mode & 022) == 0;
}

constexpr std::chrono::seconds k_request_read_timeout{10};
constexpr std::chrono::seconds k_reply_margin{30};

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void send_refusal(int fd, Refusal refusal, std::string message) {
    BrokerReply reply;
    reply.refusal = refusal;
    reply.message = std::move(message);
    (void)common::write_frame(fd, encode_reply(reply));  // the peer may be gone; nothing to do then
}

// cwd inside root (`base`, the root made canonical once per broker): a real directory beneath
// it, reached without a symlink (sandbox/access/safe_access.hpp), or a refusal. The root itself (an
// empty cwd, the common step) costs no system call.
Expected<std::filesystem::path> resolve_cwd(const std::filesystem::path& base,
                                            const std::string& cwd) {
    if (cwd.empty() || cwd == ".") return base;
    const auto relative = relative_beneath(base, base / cwd);
    if (!relative)
        return fail(ErrorKind::invalid_input, "cwd '" + cwd + "' is outside the sandbox root");
    if (*relative == ".") return base;
    auto root = SafeDir::open_trusted(base, "the sandbox root");
    if (!root) return std::unexpected(root.error());
    (void)SANDGATE_TRY(root->open_dir(*relative, "cwd '" + cwd + "'"));
    return (base / *relative).lexically_normal();
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

// The broker's busy flag, held for one step: taken only when free, given back on destruction
// (every return path) or by release() (before the reply goes out).
class BusyGuard {
public:
    static std::optional<BusyGuard> try_take(std::atomic<bool>& busy) {
        bool idle = false;
        if (!busy.compare_exchange_strong(idle, true)) return std::nullopt;
        return BusyGuard(busy);
    }
    BusyGuard(BusyGuard&& other) noexcept : m_busy(std::exchange(other.m_busy, nullptr)) {}
    BusyGuard& operator=(BusyGuard&&) = delete;
    BusyGuard(const BusyGuard&) = delete;
    ~BusyGuard() { release(); }
    void release() {
        if (m_busy) std::exchange(m_busy, nullptr)->store(false);
    }

private:
    explicit BusyGuard(std::atomic<bool>& busy) : m_busy(&busy) {}
    std::atomic<bool>* m_busy;
};

// A step's token: fired by a shutdown of the broker (`shutdown`, its parent) or when the
// client hangs up (shuts its sending side down or closes; a byte it sends does not count).
Expected<CancelToken> hangup_token(const CancelToken& shutdown, int connection) {
    auto token = CancelToken::create_linked(shutdown);
    if (!token) return token;
    SANDGATE_CHECK(token->fire_on_hangup(connection));
    return token;
}

// Sends a streamed exec's output to its client as output frames, as the step writes it. A send
// that fails (the client hung up) stops the frames; the hang-up itself cancels the step.
class FrameObserver final : public OutputObserver {
public:
    explicit FrameObserver(int fd) : m_fd(fd) {}
    void on_output(Stream stream, std::string_view chunk) override {
        if (m_broken || chunk.empty()) return;
        m_broken = !common::write_frame(m_fd, encode_output(stream, chunk));
    }

private:
    int m_fd;
    bool m_broken = false;
};

// Two threads accept on the listening socket and each runs what it accepted itself: while
// one runs a step, the other is free to answer a ping or refuse a concurrent exec as busy, and
// a step needs no hand-over between threads (each one costs a wake-up on a loaded machine).

// True when this process is the first under a pid namespace's init: its parent is pid 1, or
// the wrap's payload reporter (payload_status.hpp), which is pid 1's child and exits when we
// do, so that the namespace dies with us either way.
bool first_under_init() {
    const pid_t parent = ::getppid();
    if (parent == 1) return true;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(parent) + "/exe", ec);
    if (ec || exe != k_status_init_path) return false;
    std::ifstream stat("/proc/" + std::to_string(parent) + "/stat");  // trusted path: /proc
    std::string line;
    std::getline(stat, line);
    // After the command (which may hold ')'): ") STATE PPID ...".
    const auto close = line.rfind(')');
    if (close == std::string::npos || close + 5 > line.size()) return false;
    const char* start = line.data() + close + 4;
    pid_t grandparent = 0;
    const auto [end, parsed] = std::from_chars(start, line.data() + line.size(), grandparent);
    return parsed == std::errc() && end != start && grandparent == 1;
}

class Server {
public:
    explicit Server(const BrokerConfig& config) : m_config(config) {
        // The broker is the subreaper of its steps when its namespace dies with it (the first
        // process under the wrap's init, which exits when we do): every orphan of a step comes
        // back to it and is swept when the step ends, without a reaper process forked per step.
        // Elsewhere each step keeps its own reaper, which also kills the tree if we die.
        if (config.reaper == StepReaper::broker) {
            if (!first_under_init())
                spdlog::warn("broker {}: not under a pid namespace's init; a reaper per step",
                             config.identity);
            else if (auto ok = make_caller_subreaper(); !ok)
                spdlog::warn("broker {}: {}; a reaper per step", config.identity,
                             ok.error().message);
            else
                m_reaper = Reaper::caller;
        }
    }

    Expected<void> serve() {
        std::error_code ec;
        m_root = std::filesystem::weakly_canonical(m_config.root, ec);
        if (ec) return fail(ErrorKind::invalid_input, m_config.root.string() + ": " + ec.message());
        auto listener = SANDGATE_TRY(common::listen_unix(m_config.socket));
        // Non-blocking: should both threads wake for one connection, the one that loses the
        // accept goes back to its wait (and sees the shutdown) instead of blocking in accept.
        ::fcntl(listener.get(), F_SETFL, ::fcntl(listener.get(), F_GETFL) | O_NONBLOCK);
        spdlog::info("broker {}: listening on {} (steps reaped by {})", m_config.identity,
                     m_config.socket.string(),
                     m_reaper == Reaper::caller ? "the broker" : "a reaper per step");
        auto shutdown = SANDGATE_TRY(CancelToken::create());
        m_shutdown.emplace(std::move(shutdown));
        Expected<void> other_result;
        std::thread other([&] { other_result = accept_loop(listener.get()); });
        auto result = accept_loop(listener.get());
        // On shutdown a running step is cancelled (its tree stopped), so both loops end soon.
        other.join();
        return result ? other_result : result;
    }

private:
    // Ends once the shutdown token has fired (its fd stays readable: it wakes both threads).
    // Each thread waits in an epoll of its own with EPOLLEXCLUSIVE on the listener, so that a
    // connection wakes one of them, not both.
    Expected<void> accept_loop(int listener) {
        Fd epoll(::epoll_create1(EPOLL_CLOEXEC));
        if (!epoll) return fail(ErrorKind::permanent, errno_message("epoll_create1"));
        epoll_event on_listener{EPOLLIN | EPOLLEXCLUSIVE, {.fd = listener}};
        epoll_event on_shutdown{EPOLLIN, {.fd = m_shutdown->fd()}};
        if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, listener, &on_listener) != 0 ||
            ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, m_shutdown->fd(), &on_shutdown) != 0) {
            m_shutdown->cancel();
            return fail(ErrorKind::permanent, errno_message("epoll_ctl"));
        }
        while (!m_shutdown->cancelled()) {
            epoll_event event{};
            const int ready = ::epoll_wait(epoll.get(), &event, 1, -1);
            if (ready < 0 && errno != EINTR) {
                m_shutdown->cancel();
                return fail(ErrorKind::permanent, errno_message("epoll_wait"));
            }
            if (ready <= 0 || event.data.fd != listener) continue;
            Fd connection(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
            if (!connection) continue;  // the other thread took it (EAGAIN)
            handle(std::move(connection));
        }
        return {};
    }

    void handle(Fd connection) {
        auto peer = common::peer_credentials(connection.get());
        if (!peer || !trusted_client(*peer)) {
            spdlog::warn("broker {}: dropped a connection from another uid", m_config.identity);
            return;
        }
        const auto deadline = std::chrono::steady_clock::now() + k_request_read_timeout;
        auto frame = common::read_frame(connection.get(), k_max_request_frame, deadline);
        if (!frame) return send_refusal(connection.get(), Refusal::invalid, frame.error().message);
        auto request = parse_request(*frame);
        if (!request)
            return send_refusal(connection.get(), Refusal::invalid, request.error().message);
        switch (request->op) {
            case BrokerOp::ping:
                return reply_status(connection.get());
            case BrokerOp::shutdown:
                return shutdown(connection.get(), request->exec.identity);
            case BrokerOp::exec:
                return exec(std::move(connection), std::move(request->exec));
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
        (void)common::write_frame(fd, encode_reply(reply));
    }

    void shutdown(int fd, const std::string& identity) {
        if (identity != m_config.identity)
            return send_refusal(fd, Refusal::identity, "identity does not match this sandbox");
        (void)common::write_frame(fd, encode_reply(BrokerReply{}));
        m_shutdown->cancel();  // a step still running is stopped, as on a timeout
    }

    void exec(Fd connection, ExecRequest request) {
        if (request.identity != m_config.identity)
            return send_refusal(connection.get(), Refusal::identity,
                                "identity does not match this sandbox");
        const auto left = m_config.expires_at_ms - now_ms();
        if (left <= 0) return send_refusal(connection.get(), Refusal::expired, "sandbox expired");

        auto busy = BusyGuard::try_take(m_busy);
        if (!busy)
            return send_refusal(connection.get(), Refusal::busy,
                                "another command is running in this sandbox");
        auto cwd = resolve_cwd(m_root, request.cwd);
        if (!cwd)
            return refuse_step(std::move(*busy), connection.get(), Refusal::invalid,
                               cwd.error().message);
        RunRequest run;
        run.argv = request.shell ? shell_argv(*request.shell) : std::move(request.argv);
        run.cwd = *cwd;
        run.env = merged_env(m_config.base_env, request.env);
        run.stdin_text = std::move(request.stdin_text);
        // Never past the sandbox's expiry.
        run.timeout = std::chrono::milliseconds(left);
        if (request.timeout && *request.timeout < *run.timeout) run.timeout = request.timeout;
        run.output_limit = request.output_limit;
        run.policy.mode = SandboxMode::off;  // already inside the wrap
        if (request.kill_grace) run.kill_grace = *request.kill_grace;
        run.reaper = m_reaper;
        // The step stops on a shutdown of the broker or when its client hangs up.
        // A failure here is the broker's (descriptors, memory), not the request's.
        auto watch = hangup_token(*m_shutdown, connection.get());
        if (!watch)
            return refuse_step(std::move(*busy), connection.get(), Refusal::unavailable,
                               watch.error().message);
        run.cancel = &*watch;
        execute(std::move(connection), run, *busy, request.output_frames);
    }

    // Gives the flag back before answering: a client that reads the refusal and sends its next
    // step at once must not find the broker still busy.
    void refuse_step(BusyGuard busy, int fd, Refusal refusal, const std::string& message) {
        busy.release();
        send_refusal(fd, refusal, message);
    }

    void execute(Fd connection, RunRequest& run, BusyGuard& busy, OutputFrames frames) {
        FrameObserver live(connection.get());
        if (frames == OutputFrames::live) run.observer = &live;
        BrokerReply reply;
        reply.result = m_config.runner ? m_config.runner(run) : sandbox::run(run);
        const auto& result = *reply.result;
        // Busy ends before the reply goes out, so the next step the client sends after reading
        // it is never refused for a step that has finished.
        busy.release();
        (void)common::write_frame(connection.get(), encode_reply(reply));
        // Logged after the reply: the line wakes whoever reads our log (the agent), which then
        // runs beside the client rather than ahead of it.
        spdlog::info("broker {}: {} exited {} in {} ms, out {} B, err {} B", m_config.identity,
                     run.argv.empty() ? "" : run.argv.front(), result.exit_status(),
                     result.duration.count(), result.out.bytes, result.err.bytes);
    }

    const BrokerConfig& m_config;
    std::filesystem::path m_root;  // the root, canonical (symlinks resolved) at start-up
    Reaper m_reaper = Reaper::per_run;
    std::atomic<bool> m_busy{false};        // a step is running (on one of the two threads)
    std::optional<CancelToken> m_shutdown;  // fired by a shutdown; watched by steps and loops
};

// Waits for the reply to start. When `cancel` fires first, the sending side is shut down (the
// broker takes that as a cancel of the step, stops its tree and still answers) and the
// deadline becomes the step's kill grace plus a margin from now.
Expected<void> await_reply(int fd, const CancelToken& cancel, std::chrono::milliseconds grace,
                           std::optional<std::chrono::steady_clock::time_point>& deadline,
                           bool& hung_up) {
    if (hung_up) return {};
    for (;;) {
        int timeout_ms = -1;
        if (deadline) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                *deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return fail(ErrorKind::timeout, "broker: no reply in time");
            timeout_ms = static_cast<int>(std::min<long long>(left.count() + 1, 1 << 30));
        }
        pollfd fds[2] = {{fd, POLLIN, 0}, {cancel.fd(), POLLIN, 0}};
        const int ready = ::poll(fds, 2, timeout_ms);
        if (ready < 0 && errno != EINTR) return fail(ErrorKind::permanent, errno_message("poll"));
        if (ready <= 0) continue;
        if (fds[0].revents != 0) return {};
        if (fds[1].revents != 0) {
            if (::shutdown(fd, SHUT_WR) != 0)
                return fail(ErrorKind::permanent, errno_message("shutdown"));
            hung_up = true;
            deadline = std::chrono::steady_clock::now() + grace + k_reply_margin;
            return {};
        }
    }
}

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

Expected<BrokerReply> broker_call(const std::filesystem::path& socket, const BrokerRequest& request,
                                  std::optional<std::chrono::milliseconds> wait,
                                  common::PeerCredentials* peer, const CancelToken* cancel,
                                  OutputObserver* output) {
    auto connection = SANDGATE_TRY(common::connect_unix(socket));
    auto credentials = SANDGATE_TRY(common::peer_credentials(connection.get()));
    if (!trusted_broker(credentials, socket))
        return fail(ErrorKind::permanent, socket.string() + ": the broker runs as another uid");
    if (peer) *peer = credentials;
    SANDGATE_CHECK(common::write_frame(connection.get(), encode_request(request)));
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (wait)
        deadline = std::chrono::steady_clock::now() + *wait;
    else if (request.op != BrokerOp::exec)
        deadline = std::chrono::steady_clock::now() + k_request_read_timeout;
    else if (request.exec.timeout)
        deadline = std::chrono::steady_clock::now() + *request.exec.timeout + k_reply_margin;
    const auto grace = request.exec.kill_grace.value_or(k_default_kill_grace);
    bool hung_up = false;
    // Output frames (a streamed exec) until the reply.
    for (;;) {
        if (cancel != nullptr && request.op == BrokerOp::exec)
            SANDGATE_CHECK(await_reply(connection.get(), *cancel, grace, deadline, hung_up));
        auto frame =
            SANDGATE_TRY(common::read_frame(connection.get(), k_max_reply_frame, deadline));
        auto reply = SANDGATE_TRY(parse_reply(frame));
        if (!reply.output) return reply;
        if (output != nullptr) output->on_output(reply.output->stream, reply.output->bytes);
    }
}

}  // namespace sandbox
