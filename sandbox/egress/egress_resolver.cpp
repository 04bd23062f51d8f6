// The egress proxy's resolver thread (see egress_resolver.hpp).
#include "sandbox/egress/egress_resolver.hpp"

#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>

#include <cstring>
#include <system_error>

namespace sandbox {

Expected<std::thread> start_quiet_thread(std::function<void()> body) {
    sigset_t all, previous;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);
    std::thread thread;
    std::string error;
    try {
        thread = std::thread(std::move(body));
    } catch (const std::system_error& e) {
        error = e.what();
    }
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (!error.empty()) return fail(ErrorKind::unavailable, "starting a thread: " + error);
    return thread;
}

Expected<std::unique_ptr<EgressResolver>> EgressResolver::start() {
    std::unique_ptr<EgressResolver> resolver(new EgressResolver());
    resolver->m_ready = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!resolver->m_ready)
        return fail(ErrorKind::unavailable, errno_message("eventfd for the egress resolver"));
    auto thread = SANDGATE_TRY(start_quiet_thread([raw = resolver.get()] { raw->work(); }));
    resolver->m_thread = std::move(thread);
    return resolver;
}

EgressResolver::~EgressResolver() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) m_thread.join();
}

void EgressResolver::ask(std::uint64_t id, std::string host) {
    {
        std::lock_guard lock(m_mutex);
        m_questions.emplace_back(id, std::move(host));
    }
    m_wake.notify_one();
}

std::vector<ResolverAnswer> EgressResolver::take() {
    std::uint64_t count = 0;
    (void)!::read(m_ready.get(), &count, sizeof count);
    std::lock_guard lock(m_mutex);
    return std::exchange(m_answers, {});
}

void EgressResolver::work() {
    for (;;) {
        std::pair<std::uint64_t, std::string> question;
        {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [&] { return m_stop || !m_questions.empty(); });
            if (m_stop) return;
            question = std::move(m_questions.front());
            m_questions.pop_front();
        }
        ResolverAnswer answer;
        answer.id = question.first;
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_ADDRCONFIG;
        addrinfo* found = nullptr;
        const int rc = ::getaddrinfo(question.second.c_str(), nullptr, &hints, &found);
        if (rc != 0) {
            answer.error = ::gai_strerror(rc);
        } else {
            for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
                if ((at->ai_family != AF_INET && at->ai_family != AF_INET6) ||
                    at->ai_addrlen > sizeof(sockaddr_storage))
                    continue;
                sockaddr_storage address{};
                std::memcpy(&address, at->ai_addr, at->ai_addrlen);
                answer.addresses.push_back(address);
            }
            ::freeaddrinfo(found);
            if (answer.addresses.empty()) answer.error = "no IPv4 or IPv6 address";
        }
        {
            std::lock_guard lock(m_mutex);
            m_answers.push_back(std::move(answer));
        }
        const std::uint64_t one = 1;
        (void)!::write(m_ready.get(), &one, sizeof one);
    }
}

}  // namespace sandbox
