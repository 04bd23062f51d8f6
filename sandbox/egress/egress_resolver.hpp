#pragma once
// The egress proxy's name lookups (internal to egress_proxy.cpp): getaddrinfo blocks, so it
// runs on a thread of its own, one name at a time, and the proxy's poll loop learns of each
// answer through an eventfd. A name is looked up once per connection; the proxy connects to
// the addresses of that one answer (no second lookup between the check and the connect).

#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/base.hpp"

namespace sandbox {

struct ResolverAnswer {
    std::uint64_t id = 0;
    std::vector<sockaddr_storage> addresses;  // empty on failure
    std::string error;                        // why the lookup failed
};

class EgressResolver {
public:
    // unavailable when no eventfd or thread can be had.
    static Expected<std::unique_ptr<EgressResolver>> start();
    EgressResolver(const EgressResolver&) = delete;
    EgressResolver& operator=(const EgressResolver&) = delete;
    // Waits for the lookup under way (if any) to end; the rest are dropped.
    ~EgressResolver();

    // Readable when answers are waiting (take() clears it).
    int ready_fd() const { return m_ready.get(); }
    void ask(std::uint64_t id, std::string host);
    std::vector<ResolverAnswer> take();

private:
    EgressResolver() = default;
    void work();

    Fd m_ready;  // eventfd
    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<std::pair<std::uint64_t, std::string>> m_questions;
    std::vector<ResolverAnswer> m_answers;
    bool m_stop = false;
    std::thread m_thread;
};

// Runs `body` on a new thread that takes no signal (all are blocked in it); unavailable when
// no thread can be had.
Expected<std::thread> start_quiet_thread(std::function<void()> body);

}  // namespace sandbox
