// The egress proxy (sandbox/egress/egress_proxy.hpp) against the same loopback server reached
// directly:
//   - throughput of one large download (1 GiB by default; `bench_egress MIB`), through the proxy
//     (plain HTTP forwarding) and direct, as a ratio (target: at least 0.9);
//   - the latency one request gains through the proxy (a fresh connection each, median of 200;
//     target: under 1 ms);
//   - the proxy's resident memory with 100 concurrent CONNECT tunnels open (target: under 8 MiB).
// The bench plays the wrap's forwarder itself: it accepts the client's connection on a loopback
// listener of its own and hands the socket to the proxy over the socket pair (SCM_RIGHTS), as
// gen/egress_forwarder.cpp does inside the wrap. No sandbox is involved: the sandbox's loopback
// costs the direct and the proxied path alike.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/egress/egress_proxy.hpp"
#include "tests/support/numbers.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using common::Fd;

Fd listen_loopback(int& port) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        ::listen(fd.get(), 512) != 0) {
        std::perror("listen");
        std::exit(1);
    }
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size);
    port = ntohs(address.sin_port);
    return fd;
}

Fd connect_loopback(int port) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        std::perror("connect");
        std::exit(1);
    }
    return fd;
}

void send_all(int fd, const std::string& text) {
    std::size_t at = 0;
    while (at < text.size()) {
        const ssize_t n = ::send(fd, text.data() + at, text.size() - at, MSG_NOSIGNAL);
        if (n <= 0) return;
        at += static_cast<std::size_t>(n);
    }
}

// Reads the request head, then answers "/bytes/N" with N bytes, CONNECT with 200 and silence
// until the client closes; one thread per connection.
void serve(int listener, std::atomic<bool>& stop) {
    static std::vector<char> chunk(1 << 20, 'x');
    while (!stop) {
        Fd client(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
        if (!client) continue;
        std::thread([fd = std::move(client)]() mutable {
            std::string head;
            char buffer[4096];
            while (head.find("\r\n\r\n") == std::string::npos) {
                const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
                if (n <= 0) return;
                head.append(buffer, static_cast<std::size_t>(n));
            }
            const auto at = head.find("/bytes/");
            std::uint64_t size =
                at == std::string::npos ? 0 : std::strtoull(head.c_str() + at + 7, nullptr, 10);
            send_all(fd.get(),
                     "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n");
            while (size > 0) {
                const std::size_t n = std::min<std::uint64_t>(size, chunk.size());
                const ssize_t sent = ::send(fd.get(), chunk.data(), n, MSG_NOSIGNAL);
                if (sent <= 0) return;
                size -= static_cast<std::uint64_t>(sent);
            }
            while (::recv(fd.get(), buffer, sizeof buffer, 0) > 0) {
            }
        }).detach();
    }
}

// GET, then reads the response to the end of its body.
std::uint64_t fetch(int fd, const std::string& target, const std::string& host) {
    send_all(fd, "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    static thread_local std::vector<char> buffer(1 << 20);
    std::string head;
    std::uint64_t body = 0, length = 0;
    bool in_body = false;
    for (;;) {
        const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
        if (n <= 0) break;
        if (!in_body) {
            head.append(buffer.data(), static_cast<std::size_t>(n));
            const auto end = head.find("\r\n\r\n");
            if (end == std::string::npos) continue;
            const auto at = head.find("Content-Length: ");
            length =
                at == std::string::npos ? 0 : std::strtoull(head.c_str() + at + 16, nullptr, 10);
            body = head.size() - end - 4;
            in_body = true;
        } else {
            body += static_cast<std::uint64_t>(n);
        }
        if (body >= length) break;
    }
    return body;
}

struct Forwarder {
    int port = 0;
    Fd listener;
    Fd channel;  // our end of the proxy's pair
    std::unique_ptr<sandbox::EgressProxy> proxy;

    explicit Forwarder(int server_port) {
        listener = listen_loopback(port);
        int fds[2];
        ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds);
        channel = Fd(fds[0]);
        sandbox::EgressSettings settings;
        settings.rules = {*sandbox::parse_egress_rule("localhost:" + std::to_string(server_port))};
        settings.ranges = {*sandbox::parse_egress_range("127.0.0.1/32"),
                           *sandbox::parse_egress_range("::1")};
        auto started = sandbox::EgressProxy::start(settings, Fd(fds[1]));
        if (!started) {
            std::fprintf(stderr, "%s\n", started.error().message.c_str());
            std::exit(1);
        }
        proxy = std::move(*started);
    }

    // A client connection the proxy serves.
    Fd connect() {
        Fd client = connect_loopback(port);
        Fd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        char byte = 'c';
        iovec io{&byte, 1};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
        msghdr message{};
        message.msg_iov = &io;
        message.msg_iovlen = 1;
        message.msg_control = control;
        message.msg_controllen = sizeof control;
        cmsghdr* header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        const int fd = accepted.get();
        std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
        ::sendmsg(channel.get(), &message, MSG_NOSIGNAL);
        return client;
    }
};

long rss_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.starts_with("VmRSS:"))
            return tests::to_number<long>(std::string_view(line).substr(6)).value_or(-1);
    return 0;
}

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
    const std::uint64_t bytes = mib << 20;
    int server_port = 0;
    Fd server = listen_loopback(server_port);
    std::atomic<bool> stop{false};
    std::thread server_thread(serve, server.get(), std::ref(stop));
    server_thread.detach();
    const std::string host = "localhost:" + std::to_string(server_port);
    const std::string url = "http://" + host;
    const long rss_before = rss_kib();
    Forwarder forwarder(server_port);

    // Throughput: direct and proxied, alternating, best of three each.
    double direct = 1e9, proxied = 1e9;
    for (int round = 0; round < 3; ++round) {
        auto start = Clock::now();
        Fd d = connect_loopback(server_port);
        if (fetch(d.get(), "/bytes/" + std::to_string(bytes), host) != bytes)
            std::fprintf(stderr, "short direct read\n");
        direct = std::min(direct, seconds_since(start));
        start = Clock::now();
        Fd p = forwarder.connect();
        if (fetch(p.get(), url + "/bytes/" + std::to_string(bytes), host) != bytes)
            std::fprintf(stderr, "short proxied read\n");
        proxied = std::min(proxied, seconds_since(start));
    }
    std::printf(
        "download %llu MiB: direct %.0f MiB/s, through the proxy %.0f MiB/s, ratio %.2f (target >= "
        "0.9)\n",
        static_cast<unsigned long long>(mib), mib / direct, mib / proxied, direct / proxied);

    // Latency: a fresh connection and one small request each.
    std::vector<double> direct_ms, proxied_ms;
    for (int i = 0; i < 200; ++i) {
        auto start = Clock::now();
        {
            Fd d = connect_loopback(server_port);
            fetch(d.get(), "/bytes/100", host);
        }
        direct_ms.push_back(seconds_since(start) * 1000);
        start = Clock::now();
        {
            Fd p = forwarder.connect();
            fetch(p.get(), url + "/bytes/100", host);
        }
        proxied_ms.push_back(seconds_since(start) * 1000);
    }
    const double added = median(proxied_ms) - median(direct_ms);
    std::printf(
        "one request: direct %.3f ms, through the proxy %.3f ms, added %.3f ms (median of 200; "
        "target < 1 ms)\n",
        median(direct_ms), median(proxied_ms), added);

    // Memory: 100 CONNECT tunnels open at once.
    std::vector<Fd> tunnels;
    for (int i = 0; i < 100; ++i) {
        Fd t = forwarder.connect();
        send_all(t.get(), "CONNECT " + host + " HTTP/1.1\r\n\r\n");
        char buffer[256];
        const ssize_t n = ::recv(t.get(), buffer, sizeof buffer, 0);
        if (n <= 0 || std::string_view(buffer, static_cast<std::size_t>(n)).find(" 200 ") ==
                          std::string_view::npos)
            std::fprintf(stderr, "tunnel %d not established\n", i);
        tunnels.push_back(std::move(t));
    }
    const long rss_open = rss_kib();
    std::printf(
        "RSS with the proxy and 100 open tunnels: %ld KiB above the bench's own before the proxy "
        "(the bench's server threads included; target < 8192 KiB)\n",
        rss_open - rss_before);
    tunnels.clear();
    const auto report = forwarder.proxy->finish();
    std::printf("connections recorded: %zu\n", report.connections.size());
    stop = true;
    return 0;
}
