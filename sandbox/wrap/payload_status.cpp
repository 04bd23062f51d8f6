#include "sandbox/wrap/payload_status.hpp"

#include <unistd.h>

#include <charconv>
#include <cstddef>

namespace sandbox {

extern const unsigned char k_status_init_program[];
extern const std::size_t k_status_init_program_size;

std::string_view status_init_program() {
    return {reinterpret_cast<const char*>(k_status_init_program), k_status_init_program_size};
}

std::optional<int> reported_signal(std::string_view report) {
    constexpr std::string_view k_word = "signal ";
    if (!report.starts_with(k_word) || !report.ends_with("\n")) return std::nullopt;
    const std::string_view digits = report.substr(k_word.size(), report.size() - k_word.size() - 1);
    int signal = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), signal);
    if (ec != std::errc() || end != digits.data() + digits.size() || signal < 1 || signal > 64)
        return std::nullopt;
    return signal;
}

void apply_payload_status(const Fd& report, RunResult& result) {
    if (!report || !result.exit_code) return;
    char buffer[32];
    ssize_t n = 0;
    do {
        n = ::read(report.get(), buffer, sizeof buffer);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return;
    const auto signal = reported_signal(std::string_view(buffer, static_cast<std::size_t>(n)));
    if (!signal || *result.exit_code != 128 + *signal) return;
    result.exit_code.reset();
    result.signal = *signal;
}

}  // namespace sandbox
