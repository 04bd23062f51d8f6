#pragma once
// The bwrap arm's network namespace under --network none, made by sandgate on a helper thread
// while the run is still being parsed and planned, instead of by bwrap's clone on the run's
// critical path. A new network namespace costs ~0.35-0.5 ms of kernel work here (every
// protocol's per-namespace set-up), and bwrap's loopback set-up over netlink ~0.1 ms more.
//
// The namespace holds only loopback, up: the kernel gives lo 127.0.0.1/8 and ::1 as it comes
// up. It is owned by the caller's user namespace, so the sandbox (in a new user namespace below
// it, every capability dropped) can change nothing in it. Making one needs CAP_SYS_ADMIN: run
// without it (an unprivileged agent, or sandgate inside its own wrap), sandgate gets none and
// bwrap makes its own (--unshare-net) as before. The posture is the same either way.

#include <optional>
#include <thread>

#include "sandbox/base.hpp"

namespace sandbox {

// Makes a loopback-only network namespace on a thread of its own, started by the constructor
// unless the caller lacks CAP_SYS_ADMIN (then nothing is started); take() waits for it. The
// thread changes nothing but itself (unshare(CLONE_NEWNET) moves only the calling thread,
// which then ends) and takes no signal. The destructor waits for it too, so one never taken
// costs only a namespace made for nothing. Not copyable, not movable.
class LoopbackNetns {
public:
    LoopbackNetns();
    LoopbackNetns(const LoopbackNetns&) = delete;
    LoopbackNetns& operator=(const LoopbackNetns&) = delete;
    ~LoopbackNetns();

    // Waits for the thread, then hands over an O_RDONLY, O_CLOEXEC fd of the namespace (for
    // setns), or an invalid Fd when none could be made (no CAP_SYS_ADMIN, no thread to be had):
    // the wrapper must then make its own. Later calls return an invalid Fd.
    Fd take();

private:
    Fd m_netns;
    std::optional<std::thread> m_thread;
};

}  // namespace sandbox
