// sandbox/netns: the loopback-only network namespace sandgate makes for the bwrap arm under
// --network none, and what the wrap's network looks like whether sandgate or bwrap made it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "sandbox/process/run.hpp"
#include "sandbox/process/spawn.hpp"
#include "sandbox/wrap/netns.hpp"
#include "tests/support/capabilities.hpp"
#include "tests/support/public_dir.hpp"
#include "tests/support/read_fd.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

// Run inside the namespace under test: the interfaces it has, whether the host's loopback
// listener on `port` answers, and whether loopback works for IPv4 and IPv6.
const char* const k_probe = R"(import socket, sys
print('interfaces', ' '.join(sorted(name for _, name in socket.if_nameindex())))
try:
    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)
    print('host listener: REACHED')
except OSError as e:
    print('host listener: unreachable', e.errno)
for family, address in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):
    try:
        server = socket.socket(family)
    except OSError:
        print('loopback', address, 'unavailable')
        continue
    server.bind((address, 0))
    server.listen()
    client = socket.create_connection(server.getsockname()[:2], timeout=2)
    peer, _ = server.accept()
    client.sendall(b'x')
    print('loopback', address, 'ok' if peer.recv(1) == b'x' else 'broken')
)";

// A listening TCP socket on the host's 127.0.0.1; its port.
struct HostListener {
    common::Fd fd;
    int port = 0;
};

HostListener host_listener() {
    HostListener listener{common::Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), 0};
    REQUIRE(listener.fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener.fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener.fd.get(), 4) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(listener.fd.get(), reinterpret_cast<sockaddr*>(&address), &length) == 0);
    listener.port = ntohs(address.sin_port);
    return listener;
}

ino_t inode_of(const char* path) {
    struct stat st {};
    REQUIRE(::stat(path, &st) == 0);
    return st.st_ino;
}

// Whether this machine has IPv6 loopback at all (a kernel booted with ipv6.disable=1 has not,
// and then neither has any namespace).
bool host_has_ipv6_loopback() {
    std::ifstream addresses("/proc/net/if_inet6");
    for (std::string line; std::getline(addresses, line);)
        if (line.starts_with("00000000000000000000000000000001")) return true;
    return false;
}

void check_loopback_only(const std::string& out) {
    INFO("probe output: " << out);
    CHECK(out.find("interfaces lo\n") != std::string::npos);
    CHECK(out.find("host listener: unreachable") != std::string::npos);
    CHECK(out.find("loopback 127.0.0.1 ok") != std::string::npos);
    if (host_has_ipv6_loopback())
        CHECK(out.find("loopback ::1 ok") != std::string::npos);
    else
        CHECK(out.find("loopback ::1 unavailable") != std::string::npos);
}

// Runs `argv` unsandboxed (sandbox::run, mode off) and returns its stdout, requiring exit 0.
std::string run_plain(const std::filesystem::path& cwd, std::vector<std::string> argv) {
    sandbox::RunRequest request;
    request.argv = std::move(argv);
    request.cwd = cwd;
    request.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"}};
    request.policy.mode = sandbox::SandboxMode::off;
    request.timeout = std::chrono::seconds(60);
    const auto result = sandbox::run(request);
    INFO("stderr: " << result.err.head);
    CHECK(result.exit_status() == 0);
    return result.out.head;
}

}  // namespace

TEST_CASE("a namespace of its own: only loopback, up; this thread stays where it was") {
    const ino_t before = inode_of("/proc/self/ns/net");
    sandbox::LoopbackNetns maker;
    common::Fd netns = maker.take();
    CHECK(inode_of("/proc/self/ns/net") == before);
    CHECK_FALSE(maker.take());  // once only
    if (!tests::has_cap_sys_admin()) {
        // Unprivileged (and inside sandgate's own wrap): nothing is made; bwrap makes its own.
        CHECK_FALSE(netns);
        return;
    }
    REQUIRE(netns);
    struct stat st {};
    REQUIRE(::fstat(netns.get(), &st) == 0);
    CHECK(st.st_ino != before);

    // A child started in it (spawn's netns_fd, as run() starts bwrap) sees nothing else.
    const auto listener = host_listener();
    int out[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    common::Fd out_read(out[0]), out_write(out[1]);
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.argv = {"python3", "-c", k_probe, std::to_string(listener.port)};
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    spec.stdin_fd = null.get();
    spec.stdout_fd = out_write.get();
    spec.stderr_fd = null.get();
    spec.netns_fd = netns.get();
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    out_write.reset();
    const std::string text = tests::read_to_eof(out_read.get());
    const auto exit = child->reap();
    REQUIRE(exit);
    CHECK(exit->exit_code == 0);
    check_loopback_only(text);
}

TEST_CASE("without CAP_SYS_ADMIN no namespace is made, and the caller is left where it was") {
    // A child process drops to an unprivileged uid first when it can (as root, outside the
    // wrap); inside the wrap it has no capability to begin with.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::geteuid() == 0 &&
            (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
            ::_exit(2);
        const ino_t before = [] {
            struct stat st {};
            return ::stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
        }();
        sandbox::LoopbackNetns maker;
        const bool made = maker.take().valid();
        struct stat after {};
        const bool moved = ::stat("/proc/self/ns/net", &after) != 0 || after.st_ino != before;
        ::_exit(made ? 3 : moved ? 4 : 0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("the wrap's network is loopback only, whether sandgate or bwrap made it") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc inside the wrap");
    const auto listener = host_listener();
    const auto exec = [&](const std::filesystem::path& binary) {
        return std::vector<std::string>{
            binary.string(), "exec", "--", "python3", "-c", k_probe, std::to_string(listener.port)};
    };
    SECTION("as this process: sandgate makes it (when it holds CAP_SYS_ADMIN)") {
        check_loopback_only(run_plain(tests::make_temp_dir("netns"), exec(SANDGATE_BINARY)));
    }
    SECTION("as an unprivileged user: bwrap makes it (--unshare-net)") {
        // The build tree may sit where uid 65534 cannot reach (a checkout under /root): the
        // run gets a copy of the binary in a directory of its own under /tmp.
        const tests::PublicDir dir("netns");
        const auto binary = dir.path / "sandgate";
        std::filesystem::copy_file(SANDGATE_BINARY, binary);
        // Not root: this process is unprivileged already.
        std::vector<std::string> argv;
        if (::geteuid() == 0)
            argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
        const auto command = exec(binary);
        argv.insert(argv.end(), command.begin(), command.end());
        check_loopback_only(run_plain(dir.path, argv));
    }
}

TEST_CASE(
    "sandgate exec: the default gets a namespace of its own; --network host, in any spelling, the "
    "host's") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc inside the wrap");
    const auto dir = tests::make_temp_dir("netns-cli");
    char own[64] = {};
    REQUIRE(::readlink("/proc/self/ns/net", own, sizeof own - 1) > 0);
    const auto namespace_of = [&](std::vector<std::string> options) {
        std::vector<std::string> argv = {SANDGATE_BINARY, "exec"};
        argv.insert(argv.end(), options.begin(), options.end());
        argv.insert(argv.end(), {"--", "readlink", "/proc/self/ns/net"});
        return run_plain(dir, argv);
    };
    const std::string host = std::string(own) + "\n";
    const std::string fresh = namespace_of({});
    CHECK(fresh.starts_with("net:["));
    CHECK(fresh != host);
    CHECK(namespace_of({"--network", "none"}) != host);
    CHECK(namespace_of({"--network", "host"}) == host);
    CHECK(namespace_of({"--network=host"}) == host);
    CHECK(namespace_of({"--sandbox=off"}) == host);
}
