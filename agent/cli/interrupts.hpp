#pragma once
// InterruptGuard: while alive, SIGINT, SIGTERM and SIGHUP no longer kill sandgate; they fire
// a CancelToken instead, so the running command's whole tree is stopped (TERM, KILL after the
// grace) and its cgroup removed before sandgate exits with 128+N for the signal it got. A
// second signal while the first is being handled changes nothing (the token is one-shot).
//
// At most one guard exists at a time (the handlers reach the token through a global); the
// destructor restores the previous dispositions. Construction fails only when no eventfd can
// be had.

#include <signal.h>

#include <array>
#include <memory>
#include <optional>

#include "common/error.hpp"
#include "sandbox/process/cancel.hpp"

namespace agent {

class InterruptGuard {
public:
    static common::Expected<std::unique_ptr<InterruptGuard>> install();
    ~InterruptGuard();
    InterruptGuard(const InterruptGuard&) = delete;
    InterruptGuard& operator=(const InterruptGuard&) = delete;

    const sandbox::CancelToken& token() const { return m_token; }
    // The signal that fired the token, if one did.
    std::optional<int> received() const;

private:
    explicit InterruptGuard(sandbox::CancelToken token) : m_token(std::move(token)) {}
    sandbox::CancelToken m_token;
    std::array<struct sigaction, 3> m_previous{};
};

}  // namespace agent
