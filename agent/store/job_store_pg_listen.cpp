// The PostgreSQL queue's notifications (LISTEN/NOTIFY): idle agents are woken when another
// agent (or an API call or webhook on one) queues, re-queues or cancels a job, instead of
// polling the database.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <thread>

#include "agent/store/job_store_pg.hpp"
#include "agent/store/pg_session.hpp"
#include "common/fd.hpp"

namespace agent {

namespace {

constexpr int k_idle_wait_ms = 5000;    // the socket is watched; this only bounds a poll
constexpr int k_backoff_wait_ms = 250;  // while pg::Session backs off

common::Expected<void> listen(pg::Connection& db) {
    (void)SANDGATE_TRY(db.exec("LISTEN " + std::string(k_jobs_channel)));
    return {};
}

class Listener final : public QueueSubscription {
public:
    Listener(pg::ConnectOptions options, std::function<void(QueueChange)> woken, common::Fd stop)
        : m_session(std::move(options), "queue notifications", listen),
          m_woken(std::move(woken)),
          m_stop(std::move(stop)),
          m_thread([this] { run(); }) {}

    ~Listener() override {
        const std::uint64_t one = 1;
        (void)!::write(m_stop.get(), &one, sizeof one);
        m_thread.join();
    }

private:
    // Returns when told to stop.
    void run() {
        bool listening = false;
        while (true) {
            auto db = m_session.connection();
            if (!db) {
                listening = false;
                if (wait(-1, k_backoff_wait_ms)) return;
                continue;
            }
            // Notifications sent while we were not listening are lost: look once.
            if (!listening) m_woken(QueueChange::unknown);
            listening = true;
            pollfd fds[2] = {{(*db)->socket(), POLLIN, 0}, {m_stop.get(), POLLIN, 0}};
            if (::poll(fds, 2, k_idle_wait_ms) < 0) continue;  // EINTR
            if (fds[1].revents != 0) return;
            if (fds[0].revents == 0) continue;
            auto payloads = (*db)->notifications();
            if (!payloads) {
                m_session.reset(payloads.error().message);
                listening = false;
                continue;
            }
            for (const auto& payload : *payloads)
                m_woken(payload == k_notify_queued   ? QueueChange::queued
                        : payload == k_notify_cancel ? QueueChange::cancel_requested
                                                     : QueueChange::unknown);
        }
    }

    // Waits up to `ms` for the stop event (and `fd`, when >= 0); true when told to stop.
    bool wait(int fd, int ms) const {
        pollfd fds[2] = {{m_stop.get(), POLLIN, 0}, {fd, POLLIN, 0}};
        ::poll(fds, fd >= 0 ? 2 : 1, ms);
        return fds[0].revents != 0;
    }

    pg::Session m_session;
    std::function<void(QueueChange)> m_woken;
    common::Fd m_stop;
    std::thread m_thread;  // last: starts once everything it uses exists
};

}  // namespace

common::Expected<std::unique_ptr<QueueSubscription>> listen_pg_queue(
    pg::ConnectOptions options, std::function<void(QueueChange)> woken) {
    (void)SANDGATE_TRY(pg::api());
    common::Fd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!stop) return common::fail(common::ErrorKind::permanent, common::errno_message("eventfd"));
    return std::unique_ptr<QueueSubscription>(
        std::make_unique<Listener>(std::move(options), std::move(woken), std::move(stop)));
}

}  // namespace agent
