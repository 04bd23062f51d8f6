#include "sandbox/wrap/netns.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <system_error>

namespace sandbox {
namespace {

// The scheduler queues a new thread on its creator's CPU, where it waits until the creator
// blocks (~0.25 ms of parsing and planning here) while the other core idles; a thread allowed only
// the other CPUs starts there at once (~60 us). Best effort: on one CPU it stays where it is.
void move_off_this_cpu(std::thread& thread) {
    cpu_set_t others;
    if (::sched_getaffinity(0, sizeof others, &others) != 0) return;
    const int here = ::sched_getcpu();
    if (here < 0) return;
    CPU_CLR(here, &others);
    if (CPU_COUNT(&others) > 0)
        ::pthread_setaffinity_np(thread.native_handle(), sizeof others, &others);
}

// Whether this thread may make a network namespace: CAP_SYS_ADMIN in its effective set, in
// its own user namespace (what unshare(CLONE_NEWNET) checks). Without it no thread is started.
bool may_make_netns() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
    if (::syscall(SYS_capget, &header, data) != 0) return true;  // unknown: let unshare decide
    return (data[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32))) != 0;
}

// Moves the calling thread into a new loopback-only network namespace and returns an fd of it;
// an invalid Fd when the kernel refuses a step (the thread may then be in a half-made
// namespace: for a thread that ends next).
Fd make_loopback_netns_here() {
    if (::unshare(CLONE_NEWNET) != 0) return Fd();
    // SIOCSIFFLAGS is what `ip link set lo up` amounts to; the kernel adds 127.0.0.1/8 and ::1
    // to loopback as it comes up (bwrap's explicit RTM_NEWADDR is for kernels before 2.6.30).
    const Fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock) return Fd();
    ifreq request{};
    std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
    if (::ioctl(sock.get(), SIOCGIFFLAGS, &request) != 0) return Fd();
    request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP | IFF_RUNNING);
    if (::ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0) return Fd();
    return Fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
}

}  // namespace

LoopbackNetns::LoopbackNetns() {
    if (!may_make_netns()) return;
    sigset_t all, previous;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);  // the new thread inherits the mask
    try {
        m_thread.emplace([this] { m_netns = make_loopback_netns_here(); });
        move_off_this_cpu(*m_thread);
    } catch (const std::system_error&) {
    }
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

LoopbackNetns::~LoopbackNetns() {
    if (m_thread) m_thread->join();
}

Fd LoopbackNetns::take() {
    if (m_thread) {
        m_thread->join();
        m_thread.reset();
    }
    return std::move(m_netns);
}

}  // namespace sandbox
