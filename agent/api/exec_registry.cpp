#include "agent/api/exec_registry.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>

#include "agent/cli/random_id.hpp"

namespace agent {

using common::ErrorKind;
using common::fail;

struct ExecRegistry::Entry {
    Key key;
    sandbox::CancelToken token;
    std::atomic<bool> by_api{false};
};

namespace {

constexpr std::size_t k_max_exec_id = 64;

}  // namespace

std::string_view to_string(ExecCancelOutcome outcome) {
    switch (outcome) {
        case ExecCancelOutcome::requested:
            return "cancel_requested";
        case ExecCancelOutcome::finished:
            return "finished";
        case ExecCancelOutcome::unknown:
            return "unknown";
    }
    return "unknown";
}

std::string_view to_string(ExecCancelCause cause) {
    switch (cause) {
        case ExecCancelCause::none:
            return "none";
        case ExecCancelCause::api:
            return "api";
        case ExecCancelCause::client_hangup:
            return "client_hangup";
    }
    return "none";
}

bool valid_exec_id(std::string_view id) {
    return !id.empty() && id.size() <= k_max_exec_id &&
           std::all_of(id.begin(), id.end(), [](unsigned char c) {
               return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
           });
}

ExecRegistry::Registration::~Registration() {
    if (m_entry) m_registry->finish(*m_entry);
}

const std::string& ExecRegistry::Registration::exec_id() const {
    return m_entry->key.second;
}

const sandbox::CancelToken& ExecRegistry::Registration::token() const {
    return m_entry->token;
}

ExecCancelCause ExecRegistry::Registration::cause() const {
    if (m_entry->by_api) return ExecCancelCause::api;
    return m_entry->token.cancelled() ? ExecCancelCause::client_hangup : ExecCancelCause::none;
}

common::Expected<ExecRegistry::Registration> ExecRegistry::begin(const std::string& sandbox_id,
                                                                 std::string exec_id,
                                                                 int connection_fd) {
    if (exec_id.empty()) {
        auto made = SANDGATE_TRY(random_id("ex-", 8));
        exec_id = std::move(made);
    } else if (!valid_exec_id(exec_id)) {
        return fail(ErrorKind::invalid_input,
                    "field exec_id: 1 to 64 letters, digits, '.', '_' or '-'");
    }
    auto token = SANDGATE_TRY(sandbox::CancelToken::create());
    if (connection_fd >= 0) SANDGATE_CHECK(token.fire_on_hangup(connection_fd));
    auto entry = std::make_shared<Entry>(Key{sandbox_id, exec_id}, std::move(token));
    std::lock_guard lock(m_mutex);
    if (m_running.contains(entry->key) || finished(entry->key))
        return fail(ErrorKind::invalid_input,
                    "field exec_id: " + exec_id + " is already used in sandbox " + sandbox_id);
    m_running.emplace(entry->key, entry);
    return Registration(*this, std::move(entry));
}

ExecCancelOutcome ExecRegistry::cancel(const std::string& sandbox_id, const std::string& exec_id) {
    const Key key{sandbox_id, exec_id};
    std::lock_guard lock(m_mutex);
    if (auto it = m_running.find(key); it != m_running.end()) {
        it->second->by_api = true;  // before the token fires: cause() must never see a hang-up
        it->second->token.cancel();
        return ExecCancelOutcome::requested;
    }
    return finished(key) ? ExecCancelOutcome::finished : ExecCancelOutcome::unknown;
}

std::optional<std::string> ExecRegistry::running(const std::string& sandbox_id) {
    std::lock_guard lock(m_mutex);
    auto it = m_running.lower_bound(Key{sandbox_id, ""});
    if (it == m_running.end() || it->first.first != sandbox_id) return std::nullopt;
    return it->first.second;
}

void ExecRegistry::finish(const Entry& entry) {
    std::lock_guard lock(m_mutex);
    m_running.erase(entry.key);
    m_finished.push_back(entry.key);
    if (m_finished.size() > k_finished_kept) m_finished.pop_front();
}

bool ExecRegistry::finished(const Key& key) const {
    return std::find(m_finished.begin(), m_finished.end(), key) != m_finished.end();
}

}  // namespace agent
