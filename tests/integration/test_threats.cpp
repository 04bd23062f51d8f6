// One real attempt per applicable row of ../shared/docs/sandbox-threats.md, each asserting that
// it fails under the default wrap (bwrap, network none), plus the positive side: a normal build
// still works. The attacks run as tests/helpers/attack.cpp (sandgate-attack) or sh/python3.
// Rows 26, 28 and 29 (CPU hog, SIGTERM/SIGSTOP, output floods) belong to sandbox::run's own
// tests; row 19 (symlinks the agent follows afterwards) to the worktree tests.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "sandbox/wrap/wrap_bwrap.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

#define K_NESTED "nested bwrap cannot mount a new /proc inside the wrap"

struct Outcome {
    int status = -1;
    std::string out;
    std::string err;
};

sandbox::RunRequest request(const std::filesystem::path& cwd, std::vector<std::string> argv) {
    sandbox::RunRequest r;
    r.argv = std::move(argv);
    r.cwd = cwd;
    r.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"}};
    r.policy.read_only = {std::filesystem::path(SANDGATE_ATTACK).parent_path()};
    return r;
}

sandbox::RunRequest attack(const std::filesystem::path& cwd, std::vector<std::string> args) {
    std::vector<std::string> argv = {std::string(SANDGATE_ATTACK)};
    for (auto& arg : args) argv.push_back(std::move(arg));
    return request(cwd, std::move(argv));
}

// Runs through sandbox::run, the way every caller does.
Outcome wrapped(const sandbox::RunRequest& r) {
    const auto result = sandbox::run(r);
    const bool refused =
        result.error.has_value() && result.error->kind != sandbox::RunErrorKind::timeout;
    const std::string message = result.error.has_value() ? result.error->message : std::string();
    INFO("sandbox: " << sandbox::posture_text(result) << "\nerror: " << message);
    CHECK_FALSE(refused);
    return {result.exit_status(), result.out.head, result.err.head};
}

void require_blocked(const Outcome& outcome) {
    INFO("stdout: " << outcome.out << "\nstderr: " << outcome.err);
    CHECK(outcome.status == 0);
    CHECK(outcome.out.find("BLOCKED") != std::string::npos);
    CHECK(outcome.out.find("ESCAPED") == std::string::npos);
}

using tests::ScopedEnv;

// A listening socket on the host, closed at scope end.
class Listener {
public:
    explicit Listener(const sockaddr* address, socklen_t length, int family) {
        m_fd = common::Fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
        REQUIRE(m_fd);
        REQUIRE(::bind(m_fd.get(), address, length) == 0);
        REQUIRE(::listen(m_fd.get(), 8) == 0);
    }
    int port() const {
        sockaddr_in bound{};
        socklen_t length = sizeof bound;
        ::getsockname(m_fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
        return ntohs(bound.sin_port);
    }

private:
    common::Fd m_fd;
};

Listener tcp_listener() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return Listener(reinterpret_cast<sockaddr*>(&address), sizeof address, AF_INET);
}

Listener unix_listener(const std::string& name, bool abstract) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::size_t offset = abstract ? 1 : 0;
    std::memcpy(address.sun_path + offset, name.data(), name.size());
    return Listener(reinterpret_cast<sockaddr*>(&address),
                    static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + name.size()),
                    AF_UNIX);
}

}  // namespace

TEST_CASE("rows 6, 7, 15-18: the seccomp filter and the namespaces refuse kernel attack surface") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    const std::string mode =
        GENERATE("ptrace", "vm-read", "tiocsti", "tiocsti-high", "tioclinux", "keyctl", "add-key",
                 "request-key", "perf", "bpf", "userfaultfd", "mount", "fsopen", "open-tree",
                 "unshare-user", "clone-user", "nested-root", "clone3", "settime");
    INFO("attack: " << mode);
    require_blocked(wrapped(attack(dir, {mode})));
}

TEST_CASE("row 30 and 13: no capabilities, no new privileges, setuid binaries do not elevate") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    require_blocked(wrapped(attack(dir, {"caps"})));
    require_blocked(wrapped(attack(dir, {"no-new-privs"})));
    // su is setuid root on the host; inside it must not become root.
    auto su = wrapped(request(dir, {"sh", "-c",
                                    "su -c 'id -u' root </dev/null 2>&1; id -u; "
                                    "grep -c nosuid /proc/self/mountinfo"}));
    CHECK(su.out.find("\n0\n") == std::string::npos);
    CHECK(su.out.find("1000\n") != std::string::npos);
}

TEST_CASE("rows 1 and 4: the agent's environment is not readable, not even through /proc/1") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    ScopedEnv token("SANDGATE_TEST_GITHUB_TOKEN", "CANARY-ENV-TOKEN");
    auto result = wrapped(request(dir, {"sh", "-c",
                                        "env; cat /proc/1/environ /proc/1/cmdline "
                                        "/proc/self/environ; echo; echo done"}));
    CHECK(result.out.find("done") != std::string::npos);
    CHECK(result.out.find("CANARY-ENV-TOKEN") == std::string::npos);
    require_blocked(
        wrapped(attack(dir, {"read", "/proc/" + std::to_string(::getpid()) + "/environ"})));
    require_blocked(
        wrapped(attack(dir, {"read", "/proc/" + std::to_string(::getpid()) + "/cmdline"})));
}

TEST_CASE("row 2: home credentials are out of reach; HOME is a private scratch") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    const auto home = tests::make_temp_dir("threat-home");
    const std::vector<std::string> files = {".ssh/id_ed25519",
                                            ".git-credentials",
                                            ".netrc",
                                            ".docker/config.json",
                                            ".npmrc",
                                            ".cargo/credentials.toml",
                                            ".m2/settings.xml",
                                            ".gradle/gradle.properties",
                                            ".nuget/NuGet/NuGet.Config"};
    std::string script;
    for (const auto& file : files) {
        tests::write_file(home / file, "CANARY-HOME " + file);
        script += "cat \"$HOME/" + file + "\" \"$1/" + file + "\" 2>/dev/null; ";
    }
    ScopedEnv fake_home("HOME", home.string());
    auto result =
        wrapped(request(dir, {"sh", "-c", script + "echo home=$HOME", "sh", home.string()}));
    CHECK(result.out.find("CANARY") == std::string::npos);
    CHECK(result.out.find("home=" + home.string()) == std::string::npos);
    require_blocked(wrapped(attack(dir, {"read", (home / ".ssh/id_ed25519").string()})));
}

TEST_CASE("row 3: the agent's state, config and other jobs' worktrees stay hidden") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto root = tests::make_temp_dir("threat");
    const auto job = root / "state/sandgate/worktrees/job-1";
    const auto other = root / "state/sandgate/worktrees/job-2";
    tests::write_file(job / "src.txt", "mine");
    tests::write_file(other / "secret.txt", "CANARY-OTHER-JOB");
    tests::write_file(root / "state/sandgate/journal.db", "CANARY-JOURNAL");
    tests::write_file(root / "config.toml", "CANARY-CONFIG");
    ScopedEnv state("XDG_STATE_HOME", (root / "state").string());
    ScopedEnv config("SANDGATE_CONFIG", (root / "config.toml").string());
    // The job's worktree lies inside the state dir: it is visible, its siblings are not.
    auto in_job = wrapped(
        request(job, {"sh", "-c", "cat src.txt ../job-2/secret.txt ../../journal.db 2>&1; echo"}));
    CHECK(in_job.out.find("mine") != std::string::npos);
    CHECK(in_job.out.find("CANARY") == std::string::npos);
    // Even a step whose working directory contains the state dir cannot read it.
    auto above = wrapped(request(root, {"sh", "-c",
                                        "cat config.toml state/sandgate/journal.db "
                                        "state/sandgate/worktrees/job-2/secret.txt 2>&1; echo"}));
    CHECK(above.out.find("CANARY") == std::string::npos);
}

TEST_CASE("row 5: processes outside cannot be seen or signalled") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    require_blocked(wrapped(attack(dir, {"kill", std::to_string(::getpid())})));
    auto ps = wrapped(request(dir, {"sh", "-c", "ls /proc | grep -c '^[0-9]'"}));
    CHECK(std::atoi(ps.out.c_str()) <= 5);  // bwrap's init, the payload reporter, sh, ls, grep
}

TEST_CASE("row 8: descriptors the agent left open (files, sockets, pipes) do not reach the step") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    tests::write_file(dir / "journal.log", "CANARY-FD");
    // Deliberately inheritable: the wrap must close them, not rely on O_CLOEXEC.
    common::Fd file(::open((dir / "journal.log").c_str(), O_RDONLY));
    int pair[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    common::Fd left(pair[0]), right(pair[1]);
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    common::Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    require_blocked(wrapped(attack(dir, {"fds"})));
}

TEST_CASE(
    "rows 9-11: no egress; the host's loopback listener and abstract sockets are out of reach") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    auto tcp = tcp_listener();
    const std::string abstract_name = "sandgate-threat-" + std::to_string(::getpid());
    auto abstract = unix_listener(abstract_name, true);
    require_blocked(wrapped(attack(dir, {"tcp", std::to_string(tcp.port())})));
    require_blocked(wrapped(attack(dir, {"abstract", abstract_name})));
    require_blocked(wrapped(attack(dir, {"udp-dns"})));
    require_blocked(wrapped(attack(dir, {"metadata"})));
    auto dns =
        wrapped(request(dir, {"python3", "-c",
                              "import socket\ntry:\n socket.getaddrinfo('example.com', 443)\n "
                              "print('ESCAPED')\nexcept OSError as e:\n print('BLOCKED', e)"}));
    require_blocked(dns);
}

TEST_CASE("row 12: host path sockets (ssh-agent, docker, D-Bus, /run) are not there") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    const auto agent_dir = tests::make_temp_dir("threat-agent");
    const auto socket_path = (agent_dir / "agent.sock").string();
    auto listener = unix_listener(socket_path, false);
    ScopedEnv ssh("SSH_AUTH_SOCK", socket_path);
    require_blocked(wrapped(attack(dir, {"unix", socket_path})));
    for (const char* path : {"/run/docker.sock", "/var/run/docker.sock",
                             "/run/dbus/system_bus_socket", "/run/systemd/private"})
        require_blocked(wrapped(attack(dir, {"unix", path})));
    auto listing =
        wrapped(request(dir, {"sh", "-c", "ls /run /var/run 2>&1; echo $SSH_AUTH_SOCK"}));
    CHECK(listing.out.find(socket_path) == std::string::npos);
    CHECK(listing.out.find("No such file") != std::string::npos);
}

TEST_CASE("row 14: /proc/sys, /proc/sysrq-trigger and /sys are read-only or absent") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    for (const char* path :
         {"/proc/sys/kernel/hostname", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches",
          "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/fs/cgroup/cgroup.procs"})
        require_blocked(wrapped(attack(dir, {"write", path})));
}

TEST_CASE(
    "rows 20-22: no hard links from outside, nothing writable beyond the worktree and scratch") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    const auto cache = tests::make_temp_dir("threat-cache");
    tests::write_file(cache / "cargo/registry/index/crate", "clean");
    require_blocked(wrapped(attack(dir, {"link", "/etc/passwd", (dir / "passwd").string()})));
    require_blocked(wrapped(attack(dir, {"link", SANDGATE_ATTACK, (dir / "attack").string()})));
    for (const char* path :
         {"/usr/sandgate-x", "/etc/sandgate-x", "/sandgate-x", "/work/sandgate-x"})
        require_blocked(wrapped(attack(dir, {"write", path})));
    auto poison = attack(dir, {"write", (cache / "cargo/registry/index/crate").string()});
    poison.policy.toolchain_cache = cache;
    require_blocked(wrapped(poison));
    CHECK(tests::read_file(cache / "cargo/registry/index/crate") == "clean");
}

TEST_CASE("row 23: a fork bomb stops at --pids") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    auto bomb = attack(dir, {"forkbomb"});
    bomb.policy.pids = 64;
    auto result = wrapped(bomb);
    require_blocked(result);
    const auto at = result.out.find("forks before refusal: ");
    REQUIRE(at != std::string::npos);
    CHECK(std::atoi(result.out.c_str() + at + 22) < 64);
}

TEST_CASE("row 24: memory beyond --memory is refused or killed") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    auto hog = attack(dir, {"memory", "1024"});
    hog.policy.memory_bytes = 128ull << 20;
    auto result = wrapped(hog);
    INFO(result.out << result.err);
    CHECK(result.out.find("ESCAPED") == std::string::npos);
    CHECK((result.status == 0 || result.status == 128 + SIGKILL));
}

TEST_CASE("row 25: /tmp is a private tmpfs bounded by --tmp-size") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    auto fill = attack(dir, {"fill", "/tmp/fill", "64"});
    fill.policy.tmp_size_bytes = 8ull << 20;
    require_blocked(wrapped(fill));
    auto host_tmp = wrapped(request(
        dir, {"sh", "-c", "echo private > /tmp/sandgate-private-" + std::to_string(::getpid())}));
    CHECK(host_tmp.status == 0);
    CHECK_FALSE(std::filesystem::exists("/tmp/sandgate-private-" + std::to_string(::getpid())));
}

TEST_CASE("row 27: a daemon left behind (setsid + double fork) dies with the run") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    const std::string marker = "sandgate-daemon-marker-" + std::to_string(::getpid());
    require_blocked(wrapped(attack(dir, {"daemon", marker})));
    // The pid namespace went down with bwrap: no process carries the marker any more.
    bool survivor = false;
    for (int attempt = 0; attempt < 100; ++attempt) {
        survivor = false;
        for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
            const std::string text = tests::read_file(entry.path() / "cmdline");
            if (text.find(marker) != std::string::npos) survivor = true;
        }
        if (!survivor) break;
        ::usleep(50000);
    }
    CHECK_FALSE(survivor);
}

TEST_CASE("rows 31-32: option injection and symlinked bind destinations do not get through") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    auto injected = wrapped(request(dir, {"--bind", "/", "/", "--", "sh", "-c", "echo ESCAPED"}));
    CHECK(injected.status == 127);
    CHECK(injected.out.find("ESCAPED") == std::string::npos);
    std::filesystem::create_symlink("/root", dir / "cache");
    auto linked = request(dir, {"true"});
    linked.policy.writable = {dir / "cache"};
    auto plan = sandbox::plan_wrap(linked);
    REQUIRE_FALSE(plan);
    CHECK(plan.error().kind == common::ErrorKind::invalid_input);
}

TEST_CASE(
    "a normal build still works: worktree, HOME and TMPDIR writable, python3, a compiler, "
    "loopback") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("threat");
    tests::write_file(dir / "apps/main.cpp",
                      "#include <cstdio>\nint main() { std::puts(\"built\"); }\n");
    const std::string script =
        "set -e; c++ -o hello apps/main.cpp && ./hello; echo x > $HOME/h; echo y > $TMPDIR/t; "
        "python3 - <<'EOF'\n"
        "import socket, threading\n"
        "server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen(1)\n"
        "port = server.getsockname()[1]\n"
        "def serve():\n"
        "    conn, _ = server.accept(); conn.sendall(b'loopback-ok'); conn.close()\n"
        "threading.Thread(target=serve).start()\n"
        "client = socket.create_connection(('127.0.0.1', port)); print(client.recv(100).decode())\n"
        "EOF\n";
    auto result = wrapped(request(dir, {"sh", "-c", script}));
    INFO(result.err);
    CHECK(result.status == 0);
    CHECK(result.out == "built\nloopback-ok\n");
    CHECK(std::filesystem::exists(dir / "hello"));
}
