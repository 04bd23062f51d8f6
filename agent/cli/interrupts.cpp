#include "agent/cli/interrupts.hpp"

#include <atomic>
#include <memory>

namespace agent {
namespace {

constexpr std::array<int, 3> k_signals = {SIGINT, SIGTERM, SIGHUP};

// Reached from the signal handler: a plain pointer and a lock-free atomic only.
std::atomic<const sandbox::CancelToken*> g_token{nullptr};
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_interrupt(int sig) {
    int none = 0;
    g_received.compare_exchange_strong(none, sig);
    if (const auto* token = g_token.load()) token->cancel();  // one write(2): signal-safe
}

}  // namespace

common::Expected<std::unique_ptr<InterruptGuard>> InterruptGuard::install() {
    auto token = SANDGATE_TRY(sandbox::CancelToken::create());
    std::unique_ptr<InterruptGuard> guard(new InterruptGuard(std::move(token)));
    g_received = 0;
    g_token = &guard->m_token;
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    ::sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < k_signals.size(); ++i)
        ::sigaction(k_signals[i], &action, &guard->m_previous[i]);
    return guard;
}

InterruptGuard::~InterruptGuard() {
    for (std::size_t i = 0; i < k_signals.size(); ++i)
        ::sigaction(k_signals[i], &m_previous[i], nullptr);
    g_token = nullptr;
}

std::optional<int> InterruptGuard::received() const {
    const int sig = g_received.load();
    if (sig == 0) return std::nullopt;
    return sig;
}

}  // namespace agent
