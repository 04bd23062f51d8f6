// sandgate-test-child: the helper program the process tests run. One mode per invocation:
//   exit N                       exit with status N
//   spew out|err N               write N bytes ('a'..'z' then '\n', repeating) in 64 KiB writes
//   lines out|err COUNT TEXT     write COUNT lines "TEXT\n"
//   pieces out|err MS P1 P2 ...  write each piece separately, MS milliseconds apart (so a
//                                reader sees them in separate reads); \n in a piece is a newline
//   bytes out|err HEX            write the bytes given in hex (e.g. "ff00c3")
//   kill-self SIG                raise signal SIG (its default action)
//   stop-self                    SIGSTOP itself; exits 0 once continued
//   sleep SECONDS                sleep, then exit 0
//   cat                          copy stdin to stdout
//   env                          print the environment, one NAME=VALUE per line
//   fds                          print the open descriptors (from /proc/self/fd), one per line
//   pwd                          print the working directory
//   sid                          print "pid sid pgid"
//   The modes below leave processes behind on purpose; MARKER is in their command line so a
//   test can look for survivors in /proc/*/cmdline:
//   forever MARKER               sleep forever
//   ignore-term MARKER           ignore SIGTERM, print "ready", sleep forever
//   double-fork MARKER           fork; the child setsids and forks a grandchild that sleeps
//                                forever (ignoring SIGTERM); print the grandchild's pid; exit 0
//   hold-pipe MARKER             fork a grandchild that keeps stdout open and sleeps forever;
//                                exit 0
//   stop-child MARKER            fork a grandchild that stops itself; exit 0 once it is stopped
//   term-tree MARKER             fork a grandchild that ignores SIGTERM, then sleep forever
//                                (itself dying of SIGTERM)
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/support/numbers.hpp"

extern char** environ;

namespace {

int stream_fd(std::string_view name) {
    return name == "err" ? 2 : 1;
}

void write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0) std::exit(98);
        data += n;
        size -= static_cast<std::size_t>(n);
    }
}

void write_all(int fd, std::string_view text) {
    write_all(fd, text.data(), text.size());
}

[[noreturn]] void forever() {
    for (;;) ::pause();
}

// Re-executes this program in another mode (so the marker is in the new command line).
[[noreturn]] void become(const char* mode, const char* marker) {
    const char* self = "/proc/self/exe";
    char* args[] = {const_cast<char*>("sandgate-test-child"), const_cast<char*>(mode),
                    const_cast<char*>(marker), nullptr};
    ::execv(self, args);
    std::_Exit(97);
}

int spew(std::string_view stream, unsigned long long count) {
    std::string block(64 * 1024, '\0');
    for (std::size_t i = 0; i < block.size(); ++i)
        block[i] = (i % 27 == 26) ? '\n' : static_cast<char>('a' + i % 27);
    const int fd = stream_fd(stream);
    while (count > 0) {
        const std::size_t n = count < block.size() ? static_cast<std::size_t>(count) : block.size();
        write_all(fd, block.data(), n);
        count -= n;
    }
    return 0;
}

std::string unescape(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
            out += '\n';
            ++i;
        } else {
            out += text[i];
        }
    }
    return out;
}

int print_fds() {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return 96;
    const int own = ::dirfd(dir);
    while (const dirent* entry = ::readdir(dir)) {
        if (entry->d_name[0] == '.') continue;
        if (std::atoi(entry->d_name) == own) continue;
        std::printf("%s\n", entry->d_name);
    }
    ::closedir(dir);
    return 0;
}

int run_mode(int argc, char** argv) {
    const std::string_view mode = argv[1];
    const auto arg = [&](int i) -> const char* { return i < argc ? argv[i] : ""; };
    if (mode == "exit") return std::atoi(arg(2));
    if (mode == "spew") return spew(arg(2), std::strtoull(arg(3), nullptr, 10));
    if (mode == "lines") {
        const std::string line = std::string(arg(4)) + "\n";
        for (long i = std::atol(arg(3)); i > 0; --i) write_all(stream_fd(arg(2)), line);
        return 0;
    }
    if (mode == "pieces") {
        for (int i = 4; i < argc; ++i) {
            if (i > 4) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(arg(3))));
            write_all(stream_fd(arg(2)), unescape(argv[i]));
        }
        return 0;
    }
    if (mode == "bytes") {
        std::string data;
        const std::string_view hex = arg(3);
        for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
            data += static_cast<char>(tests::to_number<int>(hex.substr(i, 2), 16).value_or(0));
        write_all(stream_fd(arg(2)), data);
        return 0;
    }
    if (mode == "kill-self") {
        ::signal(std::atoi(arg(2)), SIG_DFL);
        ::raise(std::atoi(arg(2)));
        return 95;
    }
    if (mode == "stop-self") {
        ::raise(SIGSTOP);
        return 0;
    }
    if (mode == "sleep") {
        std::this_thread::sleep_for(std::chrono::seconds(std::atoi(arg(2))));
        return 0;
    }
    if (mode == "cat") {
        char buf[65536];
        for (ssize_t n; (n = ::read(0, buf, sizeof buf)) > 0;)
            write_all(1, buf, static_cast<std::size_t>(n));
        return 0;
    }
    if (mode == "env") {
        for (char** e = environ; *e != nullptr; ++e) std::printf("%s\n", *e);
        return 0;
    }
    if (mode == "fds") return print_fds();
    if (mode == "pwd") {
        char buf[4096];
        if (::getcwd(buf, sizeof buf) == nullptr) return 96;
        std::printf("%s\n", buf);
        return 0;
    }
    if (mode == "sid") {
        std::printf("%d %d %d\n", ::getpid(), ::getsid(0), ::getpgrp());
        return 0;
    }
    if (mode == "forever") forever();
    if (mode == "ignore-term") {
        ::signal(SIGTERM, SIG_IGN);
        write_all(1, "ready\n");
        forever();
    }
    if (mode == "double-fork") {
        int pipe_fds[2];
        if (::pipe(pipe_fds) != 0) return 96;
        if (::fork() == 0) {
            ::setsid();
            const pid_t grandchild = ::fork();
            if (grandchild == 0) {
                ::close(pipe_fds[0]);
                ::close(pipe_fds[1]);
                ::signal(SIGTERM, SIG_IGN);
                become("ignore-term", arg(2));
            }
            write_all(pipe_fds[1], std::to_string(grandchild) + "\n");
            std::_Exit(0);
        }
        ::close(pipe_fds[1]);
        char buf[32] = {};
        const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf - 1);
        ::wait(nullptr);
        write_all(2, std::string_view(buf, n > 0 ? static_cast<std::size_t>(n) : 0));
        return 0;
    }
    if (mode == "hold-pipe") {
        if (::fork() == 0) become("forever", arg(2));
        write_all(1, "parent done\n");
        return 0;
    }
    if (mode == "stop-child") {
        const pid_t child = ::fork();
        if (child == 0) {
            ::raise(SIGSTOP);
            become("forever", arg(2));
        }
        int status = 0;
        ::waitpid(child, &status, WUNTRACED);
        return WIFSTOPPED(status) ? 0 : 96;
    }
    if (mode == "term-tree") {
        if (::fork() == 0) {
            ::signal(SIGTERM, SIG_IGN);
            become("ignore-term", arg(2));
        }
        forever();
    }
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2) {
        const int rc = run_mode(argc, argv);
        if (rc >= 0) return rc;
    }
    std::fprintf(stderr, "sandgate-test-child: unknown mode\n");
    return 99;
}
