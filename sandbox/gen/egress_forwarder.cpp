// sandgate-egress-forwarder: the step's way to the egress proxy from inside the bwrap wrap.
//
//   sandgate-egress-forwarder FD PROGRAM ARGS...
//
// FD is one end of a SOCK_SEQPACKET socket pair whose other end the trusted side's proxy holds
// (sandbox/egress/egress_proxy.hpp). This program listens on 127.0.0.1:3128 in the wrap's own
// loopback-only network namespace, then forks: the child accepts connections and passes each
// socket over FD (one byte and SCM_RIGHTS; the proxy serves it from there), and writes every
// line the proxy sends back (`egress refused: ...`) to stderr, the step's log; the parent
// execs PROGRAM (an absolute path: the payload reporter) with ARGS. The listener exists
// before the payload starts, so nothing of the step can take the port first. FD is
// close-on-exec in the parent: the payload never holds it. The child dies with the wrap's pid
// namespace when the payload ends.
//
// Freestanding like gen/status_init.cpp (gen/freestanding.hpp: no libc, raw system calls).
// Built and embedded by sandbox/CMakeLists.txt (egress_forwarder_program.cpp).

#include "freestanding.hpp"

namespace {

using namespace freestanding;

constexpr long k_af_inet = 2, k_sock_stream = 1, k_sock_cloexec = 02000000;
constexpr long k_sol_socket = 1, k_so_reuseaddr = 2, k_scm_rights = 1;
constexpr long k_msg_nosignal = 0x4000, k_msg_dontwait = 0x40;
constexpr long k_f_setfd = 2, k_fd_cloexec = 1, k_sigchld = 17;
constexpr short k_pollin = 1, k_pollerr = 8, k_pollhup = 16;

struct SockaddrIn {
    unsigned short family;
    unsigned char port[2];  // network order
    unsigned char address[4];
    unsigned char zero[8];
};

struct PollFd {
    int fd;
    short events;
    short revents;
};

struct IoVec {
    void* base;
    unsigned long length;
};

struct MsgHdr {
    void* name;
    unsigned int name_length;
    IoVec* iov;
    unsigned long iov_length;
    void* control;
    unsigned long control_length;
    int flags;
};

struct FdMessage {
    unsigned long length;  // cmsg_len
    int level;
    int type;
    int fd;
    int padding;
};

// One byte, and the socket as SCM_RIGHTS.
long hand_over(long channel, long socket) {
    char byte = 'c';
    IoVec io{&byte, 1};
    FdMessage control{sizeof(unsigned long) + 2 * sizeof(int) + sizeof(int),
                      static_cast<int>(k_sol_socket), static_cast<int>(k_scm_rights),
                      static_cast<int>(socket), 0};
    MsgHdr message{nullptr, 0, &io, 1, &control, sizeof control, 0};
    return sys(k_sendmsg, channel, reinterpret_cast<long>(&message), k_msg_nosignal);
}

// Closes every fd but stderr, the listener and the channel: the forwarder holds nothing else
// of the wrap's (the reporter's pipe, say).
void close_others(long a, long b) {
    const long low = a < b ? a : b;
    const long high = a < b ? b : a;
    sys(k_close, 0);
    sys(k_close, 1);
    if (low > 3) sys(k_close_range, 3, low - 1, 0);
    if (high > low + 1) sys(k_close_range, low + 1, high - 1, 0);
    sys(k_close_range, high + 1, ~0U, 0);
}

[[noreturn]] void serve(long listener, long channel) {
    close_others(listener, channel);
    PollFd fds[2] = {{static_cast<int>(listener), k_pollin, 0},
                     {static_cast<int>(channel), k_pollin, 0}};
    char line[1024];
    for (;;) {
        const long ready = sys(k_ppoll, reinterpret_cast<long>(fds), 2, 0, 0, 8);
        if (ready == -k_eintr) continue;
        if (ready < 0) leave(1);
        if (fds[1].revents != 0) {
            const long n = sys(k_recvfrom, channel, reinterpret_cast<long>(line), sizeof line,
                               k_msg_dontwait, 0, 0);
            if (n > 0)
                sys(k_write, 2, reinterpret_cast<long>(line), n);
            else if (n == 0 || (fds[1].revents & (k_pollhup | k_pollerr)) != 0)
                leave(0);  // the proxy is gone
        }
        if ((fds[0].revents & k_pollin) != 0) {
            const long socket = sys(k_accept4, listener, 0, 0, k_sock_cloexec);
            if (socket >= 0) {
                const long sent = hand_over(channel, socket);
                sys(k_close, socket);
                if (sent < 0 && sent != -k_eintr) leave(0);
            }
        }
    }
}

}  // namespace

extern "C" [[noreturn]] void freestanding_main(long* stack) {
    const long argc = stack[0];
    char** argv = reinterpret_cast<char**>(stack + 1);
    char** envp = argv + argc + 1;
    long channel = -1;
    if (argc < 3 || !parse_fd(argv[1], channel) || argv[2][0] != '/') {
        say(2, "usage: sandgate-egress-forwarder FD /PROGRAM ARGS...\n");
        leave(125);
    }
    const long listener = sys(k_socket, k_af_inet, k_sock_stream | k_sock_cloexec, 0);
    const int one = 1;
    // 127.0.0.1:3128 (sandbox/egress/egress_proxy.hpp, k_egress_listen_*).
    const SockaddrIn address{
        static_cast<unsigned short>(k_af_inet), {3128 >> 8, 3128 & 0xff}, {127, 0, 0, 1}, {}};
    if (listener < 0 ||
        sys(k_setsockopt, listener, k_sol_socket, k_so_reuseaddr, reinterpret_cast<long>(&one),
            sizeof one) < 0 ||
        sys(k_bind, listener, reinterpret_cast<long>(&address), sizeof address) < 0 ||
        sys(k_listen, listener, 256) < 0) {
        say(2, "sandgate: the egress forwarder cannot listen on 127.0.0.1:3128 in the sandbox\n");
        leave(125);
    }
    sys(k_fcntl, channel, k_f_setfd, k_fd_cloexec);
    const long pid = sys(k_clone, k_sigchld, 0, 0, 0);
    if (pid == 0) serve(listener, channel);
    if (pid < 0) {
        say(2, "sandgate: cannot start the egress forwarder (fork)\n");
        leave(125);
    }
    sys(k_execve, reinterpret_cast<long>(argv[2]), reinterpret_cast<long>(argv + 2),
        reinterpret_cast<long>(envp));
    say(2, "sandgate: the egress forwarder cannot start ");
    say(2, argv[2]);
    say(2, "\n");
    leave(125);
}
