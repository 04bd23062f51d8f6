// The egress proxy's poll loop (see egress_proxy.hpp): connections handed over by the wrap's
// forwarder go through head -> (decision) -> resolving -> connecting -> relaying; every one
// ends as a record of the run's evidence.
#include "sandbox/egress/egress_proxy.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "sandbox/egress/egress_relay.hpp"
#include "sandbox/egress/egress_request.hpp"
#include "sandbox/egress/egress_resolver.hpp"

namespace sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t k_record_slack = 1024;      // records kept beyond max_connections
constexpr std::uint64_t k_pump_budget = 4 << 20;  // bytes per connection per wake-up
constexpr std::size_t k_max_log_line = 1000;
constexpr int k_max_accepts_per_wake = 64;

enum class Phase { head, resolving, connecting, relaying };

struct Connection {
    std::uint64_t id = 0;
    Fd step;
    Fd destination;
    Phase phase = Phase::head;
    std::string head;
    std::string leftover;  // what the step sent after its head
    ProxyRequest request;
    std::vector<sockaddr_storage> addresses;
    std::size_t next_address = 0;
    std::optional<EgressRelay> relay;
    Clock::time_point started;
    Clock::time_point deadline;
    EgressConnection record;
    bool done = false;
};

std::string seconds(std::chrono::milliseconds ms) {
    return std::to_string(ms.count() / 1000) + "s";
}

std::string_view status_text(int status) {
    switch (status) {
        case 400:
            return "Bad Request";
        case 403:
            return "Forbidden";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 431:
            return "Request Header Fields Too Large";
        case 502:
            return "Bad Gateway";
        case 503:
            return "Service Unavailable";
        case 504:
            return "Gateway Timeout";
        default:
            return "Error";
    }
}

std::string target_of(const EgressConnection& record) {
    if (record.host.empty()) return {};
    const bool v6 = record.host.find(':') != std::string::npos;
    return (v6 ? "[" + record.host + "]" : record.host) + ":" + std::to_string(record.port);
}

socklen_t length_of(const sockaddr_storage& address) {
    return address.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

void set_port(sockaddr_storage& address, std::uint16_t port) {
    if (address.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in&>(address).sin_port = htons(port);
    else
        reinterpret_cast<sockaddr_in6&>(address).sin6_port = htons(port);
}

class Proxy final : public EgressProxy {
public:
    Proxy(EgressSettings settings, Fd forwarder, Fd stop, std::unique_ptr<EgressResolver> resolver)
        : m_settings(std::move(settings)),
          m_forwarder(std::move(forwarder)),
          m_stop(std::move(stop)),
          m_resolver(std::move(resolver)) {}
    ~Proxy() override { (void)finish(); }

    void run_on(std::thread thread) { m_thread = std::move(thread); }
    void loop();
    EgressReport finish() override;

private:
    const EgressLimits& limits() const { return m_settings.limits; }
    void accept_handed_over();
    void admit(Fd step);
    void service(Connection& c, short step_events, short destination_events);
    void read_head(Connection& c);
    void decide(Connection& c);
    void resolved(ResolverAnswer answer);
    void connect_next(Connection& c);
    void connected(Connection& c);
    void relay(Connection& c);
    void expire(Connection& c);
    void refuse(Connection& c, int status, EgressVerdict verdict, std::string reason);
    void end(Connection& c, std::string reason);
    void log_line(const EgressConnection& record, std::string_view word);
    std::optional<int> next_timeout() const;

    EgressSettings m_settings;
    Fd m_forwarder;
    Fd m_stop;  // eventfd: finish() asks the loop to return
    std::unique_ptr<EgressResolver> m_resolver;
    std::map<std::uint64_t, std::unique_ptr<Connection>> m_connections;
    EgressReport m_report;
    std::uint64_t m_next_id = 1;
    std::uint64_t m_decided = 0;
    std::uint64_t m_bytes = 0;
    bool m_forwarder_gone = false;
    bool m_bytes_exhausted = false;
    std::thread m_thread;
    bool m_finished = false;
};

void Proxy::loop() {
    std::vector<pollfd> fds;
    std::vector<std::pair<Connection*, bool>>
        owners;  // per fds entry past the first three: (connection, is step)
    for (;;) {
        fds.clear();
        owners.clear();
        fds.push_back({m_stop.get(), POLLIN, 0});
        fds.push_back({m_forwarder_gone ? -1 : m_forwarder.get(), POLLIN, 0});
        fds.push_back({m_resolver->ready_fd(), POLLIN, 0});
        for (auto& [id, c] : m_connections) {
            short step = 0, destination = 0;
            if (c->phase == Phase::head) step = POLLIN;
            if (c->phase == Phase::connecting) destination = POLLOUT;
            if (c->phase == Phase::relaying) {
                step = c->relay->step_events();
                destination = c->relay->destination_events();
            }
            if (step != 0) {
                fds.push_back({c->step.get(), step, 0});
                owners.emplace_back(c.get(), true);
            }
            if (destination != 0) {
                fds.push_back({c->destination.get(), destination, 0});
                owners.emplace_back(c.get(), false);
            }
        }
        const int ready = ::poll(fds.data(), fds.size(), next_timeout().value_or(-1));
        if (ready < 0 && errno != EINTR) return;
        if (fds[0].revents != 0) return;
        if (fds[1].revents != 0) accept_handed_over();
        if (fds[2].revents != 0)
            for (auto& answer : m_resolver->take()) resolved(std::move(answer));
        for (std::size_t i = 3; i < fds.size(); ++i) {
            if (fds[i].revents == 0) continue;
            auto [c, is_step] = owners[i - 3];
            if (!c->done) service(*c, is_step ? fds[i].revents : 0, is_step ? 0 : fds[i].revents);
        }
        const auto now = Clock::now();
        for (auto& [id, c] : m_connections)
            if (!c->done && now >= c->deadline) expire(*c);
        std::erase_if(m_connections, [](const auto& entry) { return entry.second->done; });
    }
}

std::optional<int> Proxy::next_timeout() const {
    if (m_connections.empty()) return std::nullopt;
    auto nearest = Clock::time_point::max();
    for (const auto& [id, c] : m_connections) nearest = std::min(nearest, c->deadline);
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(nearest - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(wait, 0, 60'000));
}

// One message per connection: a byte and the accepted socket (SCM_RIGHTS).
void Proxy::accept_handed_over() {
    for (int i = 0; i < k_max_accepts_per_wake; ++i) {
        char byte = 0;
        iovec io{&byte, 1};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
        msghdr message{};
        message.msg_iov = &io;
        message.msg_iovlen = 1;
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        const ssize_t n = ::recvmsg(m_forwarder.get(), &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) {
            m_forwarder_gone = true;  // the wrap is gone; open connections go on until finish()
            return;
        }
        std::vector<Fd> received;
        for (cmsghdr* h = CMSG_FIRSTHDR(&message); h != nullptr; h = CMSG_NXTHDR(&message, h)) {
            if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
            const std::size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (std::size_t k = 0; k < count; ++k) {
                int fd = -1;
                std::memcpy(&fd, CMSG_DATA(h) + k * sizeof(int), sizeof fd);
                received.emplace_back(fd);
            }
        }
        if (received.empty()) continue;
        struct stat st {};
        if (::fstat(received.front().get(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        admit(std::move(received.front()));  // any further fd is closed with `received`
    }
}

void Proxy::admit(Fd step) {
    if (m_report.connections.size() + m_connections.size() >=
        limits().max_connections + k_record_slack) {
        ++m_report.unrecorded;  // closed unanswered: the evidence stays bounded
        return;
    }
    ::fcntl(step.get(), F_SETFL, ::fcntl(step.get(), F_GETFL) | O_NONBLOCK);
    auto c = std::make_unique<Connection>();
    c->id = m_next_id++;
    c->step = std::move(step);
    c->started = Clock::now();
    c->deadline = c->started + limits().head_timeout;
    Connection& ref = *c;
    m_connections.emplace(c->id, std::move(c));
    if (m_connections.size() > limits().max_concurrent)
        refuse(ref, 503, EgressVerdict::refused,
               "too many connections at once (" + std::to_string(limits().max_concurrent) + ")");
}

void Proxy::service(Connection& c, short step_events, short destination_events) {
    switch (c.phase) {
        case Phase::head:
            if (step_events != 0) read_head(c);
            break;
        case Phase::connecting:
            if (destination_events != 0) {
                int error = 0;
                socklen_t size = sizeof error;
                ::getsockopt(c.destination.get(), SOL_SOCKET, SO_ERROR, &error, &size);
                if (error == 0)
                    connected(c);
                else {
                    c.record.reason = errno_message(
                        "cannot connect to " + address_text(reinterpret_cast<sockaddr*>(
                                                   &c.addresses[c.next_address - 1])),
                        error);
                    connect_next(c);
                }
            }
            break;
        case Phase::relaying:
            relay(c);
            break;
        case Phase::resolving:
            break;
    }
}

void Proxy::read_head(Connection& c) {
    char buffer[4096];
    const std::size_t room = limits().max_head_bytes - c.head.size();
    const ssize_t n = ::recv(c.step.get(), buffer, std::min(room + 1, sizeof buffer), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0)
        return refuse(c, 400, EgressVerdict::refused, "closed before a complete request head");
    c.head.append(buffer, static_cast<std::size_t>(n));
    const std::size_t end = request_head_end(c.head);
    if (end == std::string::npos) {
        if (c.head.size() >= limits().max_head_bytes)
            refuse(
                c, 431, EgressVerdict::refused,
                "request head larger than " + std::to_string(limits().max_head_bytes) + " bytes");
        return;
    }
    c.leftover = c.head.substr(end);
    c.head.resize(end);
    decide(c);
}

void Proxy::decide(Connection& c) {
    auto parsed = parse_request_head(c.head);
    c.head.clear();
    c.head.shrink_to_fit();
    if (!parsed)
        return refuse(c, parsed.error().status, EgressVerdict::refused, parsed.error().reason);
    c.request = std::move(*parsed);
    c.record.host = c.request.host;
    c.record.port = c.request.port;
    if (m_bytes_exhausted)
        return refuse(c, 403, EgressVerdict::refused,
                      "byte limit reached (" + std::to_string(limits().max_bytes) + " per run)");
    if (++m_decided > limits().max_connections)
        return refuse(
            c, 403, EgressVerdict::refused,
            "connection limit reached (" + std::to_string(limits().max_connections) + " per run)");
    if (is_ip_literal(c.request.host))
        return refuse(c, 403, EgressVerdict::refused,
                      "an IP literal; only names on the allowlist are served");
    if (!egress_allowed(m_settings.rules, c.request.host, c.request.port))
        return refuse(c, 403, EgressVerdict::refused, "not on the allowlist");
    c.phase = Phase::resolving;
    c.deadline = Clock::now() + limits().connect_timeout;
    m_resolver->ask(c.id, c.request.host);
}

void Proxy::resolved(ResolverAnswer answer) {
    const auto found = m_connections.find(answer.id);
    if (found == m_connections.end() || found->second->done) return;
    Connection& c = *found->second;
    if (answer.addresses.empty())
        return refuse(c, 502, EgressVerdict::failed, "cannot resolve: " + answer.error);
    for (auto& address : answer.addresses) {
        const auto* raw = reinterpret_cast<const sockaddr*>(&address);
        const auto special = special_address(raw);
        if (!special) continue;
        const bool listed =
            std::any_of(m_settings.ranges.begin(), m_settings.ranges.end(),
                        [&](const EgressRange& range) { return range_contains(range, raw); });
        if (!listed)
            return refuse(c, 403, EgressVerdict::refused,
                          "resolves to " + std::string(*special) + " address " + address_text(raw));
    }
    for (auto& address : answer.addresses) set_port(address, c.request.port);
    c.addresses = std::move(answer.addresses);
    connect_next(c);
}

// The resolved addresses in turn, as the lookup gave them: never a second lookup.
void Proxy::connect_next(Connection& c) {
    while (c.next_address < c.addresses.size()) {
        const auto& address = c.addresses[c.next_address++];
        const auto* raw = reinterpret_cast<const sockaddr*>(&address);
        c.destination =
            Fd(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!c.destination) {
            c.record.reason = errno_message("socket");
            continue;
        }
        if (::connect(c.destination.get(), raw, length_of(address)) == 0) return connected(c);
        if (errno == EINPROGRESS) {
            c.phase = Phase::connecting;
            return;
        }
        c.record.reason = errno_message("cannot connect to " + address_text(raw));
    }
    refuse(c, 502, EgressVerdict::failed,
           c.record.reason.empty() ? "cannot connect" : c.record.reason);
}

void Proxy::connected(Connection& c) {
    auto made = EgressRelay::make();
    if (!made) return refuse(c, 502, EgressVerdict::failed, made.error().message);
    c.relay.emplace(std::move(*made));
    c.record.verdict = EgressVerdict::allowed;
    c.record.reason.clear();
    c.record.address =
        address_text(reinterpret_cast<const sockaddr*>(&c.addresses[c.next_address - 1]));
    if (c.request.method == ProxyMethod::connect)
        c.relay->queue_in("HTTP/1.1 200 Connection established\r\n\r\n");
    else
        c.relay->queue_out(std::move(c.request.upstream_head));
    c.relay->queue_out(std::move(c.leftover));
    c.phase = Phase::relaying;
    c.deadline = Clock::now() + limits().idle_timeout;
    relay(c);
}

void Proxy::relay(Connection& c) {
    const std::uint64_t before = c.relay->bytes_out() + c.relay->bytes_in();
    std::string error;
    const PumpState state = c.relay->pump(c.step.get(), c.destination.get(), k_pump_budget, error);
    const std::uint64_t moved = c.relay->bytes_out() + c.relay->bytes_in() - before;
    if (moved > 0) c.deadline = Clock::now() + limits().idle_timeout;
    m_bytes += moved;
    if (state == PumpState::finished) return end(c, "closed");
    if (state == PumpState::failed) return end(c, "ended: " + error);
    if (m_bytes > limits().max_bytes && !m_bytes_exhausted) {
        m_bytes_exhausted = true;
        const std::string reason =
            "byte limit reached (" + std::to_string(limits().max_bytes) + " per run)";
        for (auto& [id, other] : m_connections)
            if (!other->done && other->phase == Phase::relaying) {
                end(*other, reason);
                log_line(m_report.connections.back(), "stopped");
            }
    }
}

void Proxy::expire(Connection& c) {
    switch (c.phase) {
        case Phase::head:
            return refuse(c, 408, EgressVerdict::refused,
                          "no complete request head within " + seconds(limits().head_timeout));
        case Phase::resolving:
        case Phase::connecting:
            return refuse(c, 504, EgressVerdict::failed,
                          "not connected within " + seconds(limits().connect_timeout));
        case Phase::relaying:
            return end(c, "idle timeout (" + seconds(limits().idle_timeout) + ")");
    }
}

void Proxy::refuse(Connection& c, int status, EgressVerdict verdict, std::string reason) {
    c.record.verdict = verdict;
    c.record.reason = std::move(reason);
    const std::string target = target_of(c.record);
    const std::string body =
        "sandgate: egress " + std::string(to_string(verdict)) + ": " +
        (target.empty() ? c.record.reason : target + " (" + c.record.reason + ")") + "\n";
    const std::string response =
        "HTTP/1.1 " + std::to_string(status) + " " + std::string(status_text(status)) +
        "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nConnection: close\r\n\r\n" + body;
    (void)::send(c.step.get(), response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    c.record.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started);
    m_report.connections.push_back(c.record);
    log_line(c.record, to_string(verdict));
    c.done = true;
}

void Proxy::end(Connection& c, std::string reason) {
    c.record.reason = std::move(reason);
    c.record.bytes_out = c.relay->bytes_out();
    c.record.bytes_in = c.relay->bytes_in();
    c.record.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started);
    m_report.connections.push_back(c.record);
    c.done = true;
}

// The step's log learns of a refusal through the forwarder, which writes the line to the
// step's stderr. Never blocks: a line the socket cannot take now is dropped (the record stays).
void Proxy::log_line(const EgressConnection& record, std::string_view word) {
    if (m_forwarder_gone) return;
    const std::string target = target_of(record);
    std::string line = "egress " + std::string(word) + ": " +
                       (target.empty() ? record.reason : target + " (" + record.reason + ")");
    if (line.size() > k_max_log_line) line.resize(k_max_log_line);
    line.push_back('\n');
    (void)::send(m_forwarder.get(), line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

EgressReport Proxy::finish() {
    if (m_finished) return {};
    m_finished = true;
    const std::uint64_t one = 1;
    (void)!::write(m_stop.get(), &one, sizeof one);
    if (m_thread.joinable()) m_thread.join();
    for (auto& [id, c] : m_connections) {
        if (c->done) continue;
        if (c->phase == Phase::relaying)
            end(*c, "run ended");
        else
            refuse(*c, 503, EgressVerdict::refused, "run ended before the connection was made");
    }
    m_connections.clear();
    m_resolver.reset();
    return std::exchange(m_report, {});
}

}  // namespace

Expected<std::unique_ptr<EgressProxy>> EgressProxy::start(EgressSettings settings, Fd forwarder) {
    if (!forwarder) return fail(ErrorKind::unavailable, "egress proxy: no forwarder socket");
    Fd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop) return fail(ErrorKind::unavailable, errno_message("eventfd for the egress proxy"));
    auto resolver = SANDGATE_TRY(EgressResolver::start());
    auto proxy = std::make_unique<Proxy>(std::move(settings), std::move(forwarder), std::move(stop),
                                         std::move(resolver));
    auto thread = SANDGATE_TRY(start_quiet_thread([raw = proxy.get()] { raw->loop(); }));
    proxy->run_on(std::move(thread));
    return std::unique_ptr<EgressProxy>(std::move(proxy));
}

std::vector<std::pair<std::string, std::string>> egress_proxy_environment() {
    const std::string url(k_egress_proxy_url);
    std::vector<std::pair<std::string, std::string>> env;
    for (const char* name : {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY",
                             "all_proxy", "npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY",
                             "CARGO_HTTP_PROXY", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY"})
        env.emplace_back(name, url);
    // Only the wrap's own loopback bypasses the proxy (a step's test server); no remote name.
    env.emplace_back("NO_PROXY", "localhost,127.0.0.1,::1");
    env.emplace_back("no_proxy", "localhost,127.0.0.1,::1");
    return env;
}

}  // namespace sandbox
