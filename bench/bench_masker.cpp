// bench_masker: the cost of masking a step's live log. Feeds ~64 MiB of log text in 4 KiB
// chunks through LineSplitter, (a) only splitting lines (the baseline every step pays) and
// (b) splitting and masking with 20 registered secrets (each also registered in its
// encodings), and prints MiB/s for both and the ratio.
#include <chrono>
#include <cstdio>
#include <string>

#include "jobs/run/masker.hpp"

namespace {

std::string make_log() {
    std::string log;
    for (int i = 0; log.size() < 64u * 1024 * 1024; ++i) {
        log += "[" + std::to_string(i) + "] compiling src/module_" + std::to_string(i % 97) +
               ".cpp with -O2 -Wall -Wextra; warnings: 0, notes: none, token=";
        log += (i % 1000 == 0) ? "ghp_secretvalue_number_7" : "public-value";
        log += '\n';
    }
    return log;
}

double run(const std::string& log, const jobs::Masker* masker, std::size_t& sink_bytes) {
    const auto start = std::chrono::steady_clock::now();
    jobs::LineSplitter splitter([&](std::string_view line) {
        sink_bytes += masker ? masker->mask(line).size() : line.size();
    });
    for (std::size_t at = 0; at < log.size(); at += 4096) {
        splitter.feed(std::string_view(log).substr(at, 4096));
    }
    splitter.flush();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
    const auto log = make_log();
    jobs::Masker masker;
    for (int i = 0; i < 20; ++i) masker.add_secret("ghp_secretvalue_number_" + std::to_string(i));
    std::size_t plain_bytes = 0;
    std::size_t masked_bytes = 0;
    const double plain = run(log, nullptr, plain_bytes);
    const double masked = run(log, &masker, masked_bytes);
    const double mib = static_cast<double>(log.size()) / (1024.0 * 1024.0);
    std::printf("log: %.1f MiB, %zu registered values\n", mib, masker.size());
    std::printf("split only:       %8.1f MiB/s\n", mib / plain);
    std::printf("split + mask:     %8.1f MiB/s\n", mib / masked);
    std::printf("masking overhead: %.2fx the split-only time (masked %zu -> %zu bytes)\n",
                masked / plain, plain_bytes, masked_bytes);
    return 0;
}
