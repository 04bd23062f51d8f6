// sandgate-attack: one real attack per invocation, as a pull request's code would try it.
// Prints "BLOCKED: <how>" and exits 0 when the attack failed, "ESCAPED: <what>" and exits 1
// when it worked, exits 2 on bad usage. The threat tests run it inside the wrap.
//
//   ptrace | vm-read | tiocsti | tiocsti-high | tioclinux | keyctl | add-key | request-key |
//   perf | bpf | userfaultfd | mount | fsopen | open-tree | unshare-user | clone-user |
//   nested-root | clone3 | settime |
//   caps | no-new-privs | kill PID | tcp PORT | abstract NAME | unix PATH | udp-dns |
//   metadata | read PATH | write PATH | link SRC DST | forkbomb | memory MIB | fill PATH MIB |
//   daemon MARKER | fds
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

int blocked(const std::string& how) {
    std::printf("BLOCKED: %s\n", how.c_str());
    return 0;
}
int escaped(const std::string& what) {
    std::printf("ESCAPED: %s\n", what.c_str());
    return 1;
}
// A syscall result: blocked when it failed (with the errno named).
int verdict(long rc, const char* what) {
    if (rc < 0) return blocked(std::string(what) + ": " + std::strerror(errno));
    return escaped(what);
}
// Blocked only with exactly `expected` (the filter's answer, not the kernel's own).
int verdict_errno(long rc, int expected, const char* what);

// Root of a user namespace of the step's own (as the sandbox's sudo makes it) tries what a
// root with capabilities would: each must fail.
int nested_root() {
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    if (::unshare(CLONE_NEWUSER) != 0)
        return blocked(std::string("unshare(CLONE_NEWUSER): ") + std::strerror(errno));
    const auto write = [](const char* path, const std::string& text) {
        std::ofstream out(path);
        out << text;
        return static_cast<bool>(out.flush());
    };
    if (!write("/proc/self/setgroups", "deny") ||
        !write("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !write("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"))
        return blocked("mapping root in the nested user namespace");
    if (::getuid() != 0) return blocked("not root in the nested user namespace");
    struct Try {
        const char* what;
        long rc;
    };
    const Try tries[] = {
        {"unshare(CLONE_NEWNET)", ::unshare(CLONE_NEWNET)},
        {"unshare(CLONE_NEWNS)", ::unshare(CLONE_NEWNS)},
        {"unshare(CLONE_NEWUSER|CLONE_NEWPID)", ::unshare(CLONE_NEWUSER | CLONE_NEWPID)},
        {"mount", ::mount("none", "/tmp", "tmpfs", 0, nullptr)},
        {"sethostname", ::sethostname("escaped", 7)},
        {"setns", ::setns(::open("/proc/1/ns/net", O_RDONLY), 0)},
    };
    for (const auto& attempt : tries) {
        if (attempt.rc == 0)
            return escaped(std::string(attempt.what) + " as root of a nested user namespace");
    }
    return blocked(
        "root of a nested user namespace owns nothing else (netns, mntns, pidns, mount, "
        "sethostname, setns all refused)");
}

int verdict_errno(long rc, int expected, const char* what) {
    if (rc < 0 && errno == expected)
        return blocked(std::string(what) + ": " + std::strerror(errno));
    if (rc < 0)
        return escaped(std::string(what) + " reached the kernel (" + std::strerror(errno) + ")");
    return escaped(what);
}

pid_t sleeping_child() {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::pause();
        ::_exit(0);
    }
    return pid;
}

int connect_to(const sockaddr* address, socklen_t length, int family, int type, const char* what) {
    const int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return blocked(std::string(what) + ": socket: " + std::strerror(errno));
    const int rc = ::connect(fd, address, length);
    if (rc == 0 && type == SOCK_DGRAM) {
        const long sent = ::send(fd, "x", 1, 0);
        ::close(fd);
        return verdict(sent, what);
    }
    ::close(fd);
    return verdict(rc, what);
}

int tcp(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect_to(reinterpret_cast<sockaddr*>(&address), sizeof address, AF_INET, SOCK_STREAM,
                      "connect to the host's 127.0.0.1 listener");
}

int ipv4(const char* ip, int port, int type, const char* what) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, ip, &address.sin_addr);
    return connect_to(reinterpret_cast<sockaddr*>(&address), sizeof address, AF_INET, type, what);
}

int unix_socket(const std::string& name, bool abstract) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::size_t offset = abstract ? 1 : 0;
    std::memcpy(address.sun_path + offset, name.data(), name.size());
    const auto length =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + name.size());
    return connect_to(
        reinterpret_cast<sockaddr*>(&address), length, AF_UNIX, SOCK_STREAM,
        abstract ? "connect to the host's abstract socket" : "connect to a host path socket");
}

int forkbomb() {
    int forks = 0;
    for (; forks < 100000; ++forks) {
        const pid_t pid = ::fork();
        if (pid < 0) {
            std::printf("forks before refusal: %d\n", forks);
            return blocked(std::string("fork: ") + std::strerror(errno));
        }
        if (pid == 0) {
            ::pause();
            ::_exit(0);
        }
    }
    return escaped("100000 processes");
}

int memory(long mib) {
    std::vector<char*> blocks;
    for (long i = 0; i < mib; ++i) {
        char* block = static_cast<char*>(std::malloc(1 << 20));
        if (block == nullptr) return blocked("malloc failed after " + std::to_string(i) + " MiB");
        std::memset(block, 1, 1 << 20);
        blocks.push_back(block);
    }
    return escaped(std::to_string(mib) + " MiB allocated and touched");
}

int fill(const char* path, long mib) {
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return blocked(std::string("open: ") + std::strerror(errno));
    std::string chunk(1 << 20, 'x');
    for (long i = 0; i < mib; ++i) {
        if (::write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) {
            const int saved = errno;
            ::close(fd);
            ::unlink(path);
            return blocked("write after " + std::to_string(i) + " MiB: " + std::strerror(saved));
        }
    }
    ::close(fd);
    return escaped(std::to_string(mib) + " MiB written to " + path);
}

int daemonize(const char* marker) {
    if (::fork() == 0) {
        ::setsid();
        if (::fork() == 0) {
            ::execl("/bin/sleep", "sleep", "300", marker, nullptr);  // the marker shows in cmdline
            ::_exit(1);
        }
        ::_exit(0);
    }
    ::usleep(200000);
    return blocked("daemon started; the wrap must reap it");
}

int fds() {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return escaped("cannot list fds");
    std::string extra;
    const int own = ::dirfd(dir);
    while (dirent* entry = ::readdir(dir)) {
        const int fd = std::atoi(entry->d_name);
        if (entry->d_name[0] == '.' || fd <= 2 || fd == own) continue;
        char target[256] = {};
        std::string link = std::string("/proc/self/fd/") + entry->d_name;
        (void)!::readlink(link.c_str(), target, sizeof target - 1);
        extra += std::string(" ") + entry->d_name + "->" + target;
    }
    ::closedir(dir);
    if (extra.empty()) return blocked("no descriptor above 2");
    return escaped("inherited descriptors:" + extra);
}

int status_field(const char* field, const char* wanted) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(field, 0) == 0) {
            if (line.find(wanted) != std::string::npos) return blocked(line);
            return escaped(line);
        }
    }
    return escaped(std::string("no ") + field);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const std::string_view mode = argv[1];
    const char* arg = argc > 2 ? argv[2] : "";
    char c = 'x';
    if (mode == "ptrace") {
        const pid_t child = sleeping_child();
        const long rc = ::ptrace(PTRACE_ATTACH, child, nullptr, nullptr);
        ::kill(child, SIGKILL);
        return verdict_errno(rc, EPERM, "ptrace attach");
    }
    if (mode == "vm-read") {
        const pid_t child = sleeping_child();
        char buffer[8];
        iovec local{buffer, sizeof buffer}, remote{&c, 1};
        const long rc = ::process_vm_readv(child, &local, 1, &remote, 1, 0);
        ::kill(child, SIGKILL);
        return verdict_errno(rc, EPERM, "process_vm_readv");
    }
    if (mode == "tiocsti")
        return verdict_errno(::syscall(SYS_ioctl, 0, TIOCSTI, &c), EPERM, "TIOCSTI");
    if (mode == "tiocsti-high")
        return verdict_errno(::syscall(SYS_ioctl, 0, TIOCSTI | (1UL << 32), &c), EPERM,
                             "TIOCSTI with high bits");
    if (mode == "tioclinux")
        return verdict_errno(::syscall(SYS_ioctl, 0, TIOCLINUX, &c), EPERM, "TIOCLINUX");
    if (mode == "keyctl")
        return verdict_errno(
            ::syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), EPERM,
            "keyctl");
    if (mode == "add-key")
        return verdict_errno(
            ::syscall(SYS_add_key, "user", "sandgate", "x", 1, KEY_SPEC_SESSION_KEYRING), EPERM,
            "add_key");
    if (mode == "request-key")
        return verdict_errno(::syscall(SYS_request_key, "user", "sandgate", nullptr, 0), EPERM,
                             "request_key");
    if (mode == "perf") {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.exclude_kernel = 1;
        return verdict_errno(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0), EPERM,
                             "perf_event_open");
    }
    if (mode == "bpf") {
        bpf_attr attr{};
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = 4;
        attr.value_size = 4;
        attr.max_entries = 1;
        return verdict_errno(::syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr), EPERM, "bpf");
    }
    if (mode == "userfaultfd")
        return verdict_errno(::syscall(SYS_userfaultfd, O_CLOEXEC), EPERM, "userfaultfd");
    if (mode == "mount")
        return verdict_errno(::mount("none", "/tmp", "tmpfs", 0, nullptr), EPERM, "mount");
    if (mode == "fsopen") return verdict_errno(::syscall(SYS_fsopen, "tmpfs", 0), EPERM, "fsopen");
    if (mode == "open-tree")
        return verdict_errno(::syscall(SYS_open_tree, AT_FDCWD, "/usr", 1), EPERM, "open_tree");
    // A user namespace together with any other: refused by the filter.
    if (mode == "unshare-user")
        return verdict_errno(::unshare(CLONE_NEWUSER | CLONE_NEWNS), EPERM,
                             "unshare(CLONE_NEWUSER|CLONE_NEWNS)");
    if (mode == "clone-user") {
        const long rc = ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (rc == 0) ::_exit(0);
        return verdict_errno(rc, EPERM, "clone(CLONE_NEWUSER)");
    }
    // The sandbox's sudo gets a user namespace alone, as root of it: that root must own
    // nothing else (no network or mount namespace, no mount, no hostname, no setns).
    if (mode == "nested-root") return nested_root();
    if (mode == "clone3") {
        clone_args args{};
        args.flags = CLONE_NEWUSER;
        args.exit_signal = SIGCHLD;
        const long rc = ::syscall(SYS_clone3, &args, sizeof args);
        if (rc == 0) ::_exit(0);
        return verdict(rc, "clone3(CLONE_NEWUSER)");
    }
    if (mode == "settime") {
        timespec now{};
        ::clock_gettime(CLOCK_REALTIME, &now);
        return verdict_errno(::clock_settime(CLOCK_REALTIME, &now), EPERM, "clock_settime");
    }
    if (mode == "caps") return status_field("CapEff:", "0000000000000000");
    if (mode == "no-new-privs") return status_field("NoNewPrivs:", "1");
    if (mode == "kill") return verdict(::kill(std::atoi(arg), 0), "kill -0 of a host process");
    if (mode == "tcp") return tcp(std::atoi(arg));
    if (mode == "abstract") return unix_socket(arg, true);
    if (mode == "unix") return unix_socket(arg, false);
    if (mode == "udp-dns") return ipv4("8.8.8.8", 53, SOCK_DGRAM, "UDP to 8.8.8.8:53");
    if (mode == "metadata")
        return ipv4("169.254.169.254", 80, SOCK_STREAM, "connect to 169.254.169.254:80");
    if (mode == "read") {
        const int fd = ::open(arg, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return blocked(std::string("open ") + arg + ": " + std::strerror(errno));
        char buffer[200] = {};
        const long n = ::read(fd, buffer, sizeof buffer - 1);
        ::close(fd);
        if (n < 0) return blocked(std::string("read ") + arg + ": " + std::strerror(errno));
        return escaped(std::string("read ") + arg + ": " + buffer);
    }
    if (mode == "write") {
        const int fd = ::open(arg, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return blocked(std::string("open ") + arg + ": " + std::strerror(errno));
        const long rc = ::write(fd, "1", 1);
        ::close(fd);
        return verdict(rc, "write");
    }
    if (mode == "link" && argc > 3)
        return verdict(::link(argv[2], argv[3]), "hard link from outside");
    if (mode == "forkbomb") return forkbomb();
    if (mode == "memory") return memory(std::atol(arg));
    if (mode == "fill" && argc > 3) return fill(argv[2], std::atol(argv[3]));
    if (mode == "daemon") return daemonize(arg);
    if (mode == "fds") return fds();
    return 2;
}
