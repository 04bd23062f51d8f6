#pragma once
// The API's sandbox execs in flight, by (sandbox id, exec id), so that a later request can
// cancel one (POST /v1/sandboxes/{id}/execs/{exec_id}/cancel) and a client that hangs up on
// its own exec cancels it, as the actions runner and buildkite-agent stop a step whose
// listener went away.
//
// Contract:
// - begin() hands out a Registration (RAII): the exec counts as running while it lives. Its
//   token fires on cancel() of that exec id, or when the peer of `connection_fd` (the HTTP
//   client's socket, when >= 0) hangs up. Destroying the Registration moves the id to a
//   bounded list of finished execs (the last k_finished_kept), so a late cancel is told
//   "finished" rather than "unknown".
// - An exec id is the caller's (letters, digits, '.', '_', '-'; 1 to 64) or, when empty, a
//   fresh random "ex-" id. An id running or recently finished in the same sandbox is refused
//   (invalid_input): a cancel must never reach a later exec that reused the name.
// - cancel() never blocks on the step: it fires the token and returns; the exec's own answer
//   carries the cancelled result once the broker has stopped the step's tree.
// Thread-safe.

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "sandbox/process/cancel.hpp"

namespace agent {

enum class ExecCancelOutcome { requested, finished, unknown };
std::string_view to_string(ExecCancelOutcome outcome);

// Who stopped a cancelled exec: a cancel request, its client hanging up, or neither (the
// sandbox was destroyed or its broker shut down under it).
enum class ExecCancelCause { none, api, client_hangup };
std::string_view to_string(ExecCancelCause cause);

class ExecRegistry {
    struct Entry;

public:
    static constexpr std::size_t k_finished_kept = 256;

    class Registration {
    public:
        Registration(Registration&& other) noexcept = default;
        Registration& operator=(Registration&&) = delete;
        Registration(const Registration&) = delete;
        ~Registration();
        const std::string& exec_id() const;
        const sandbox::CancelToken& token() const;  // valid while this lives
        ExecCancelCause cause() const;              // none until the token fired

    private:
        friend class ExecRegistry;
        Registration(ExecRegistry& registry, std::shared_ptr<Entry> entry)
            : m_registry(&registry), m_entry(std::move(entry)) {}
        ExecRegistry* m_registry;
        std::shared_ptr<Entry> m_entry;
    };

    common::Expected<Registration> begin(const std::string& sandbox_id, std::string exec_id,
                                         int connection_fd = -1);
    ExecCancelOutcome cancel(const std::string& sandbox_id, const std::string& exec_id);
    // The exec running in `sandbox_id`, if any (one command at a time per sandbox; a refused
    // second exec may briefly show too, until the broker's refusal ends it).
    std::optional<std::string> running(const std::string& sandbox_id);

private:
    using Key = std::pair<std::string, std::string>;  // sandbox id, exec id
    void finish(const Entry& entry);
    bool finished(const Key& key) const;

    std::mutex m_mutex;
    std::map<Key, std::shared_ptr<Entry>> m_running;
    std::deque<Key> m_finished;
};

// Whether `id` is a well-formed exec id (see above).
bool valid_exec_id(std::string_view id);

}  // namespace agent
