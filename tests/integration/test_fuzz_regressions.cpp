// The fuzz targets (fuzz/targets/*.cpp), built into this test without libFuzzer, replay every
// input of fuzz/regressions/<target>/: each is an input that once crashed, hung or leaked
// sandgate (found by scripts/fuzz.sh or reported), kept so that it never does again.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>

#include "fuzz/fuzz_target.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

const std::filesystem::path k_regressions =
    std::filesystem::path(SANDGATE_SOURCE_DIR) / "fuzz/regressions";

}  // namespace

TEST_CASE("every fuzz target is registered and every regression directory names one") {
    REQUIRE(fuzz::target_count() >= 10);
    std::set<std::string> names;
    for (std::size_t i = 0; i < fuzz::target_count(); ++i) names.insert(fuzz::target_at(i).name);
    for (const auto& entry : std::filesystem::directory_iterator(k_regressions)) {
        INFO(entry.path());
        CHECK(names.contains(entry.path().filename().string()));
    }
}

TEST_CASE("every input that ever broke a parser is handled") {
    std::size_t replayed = 0;
    for (std::size_t i = 0; i < fuzz::target_count(); ++i) {
        const auto target = fuzz::target_at(i);
        const auto dir = k_regressions / target.name;
        if (!std::filesystem::is_directory(dir)) continue;
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            if (!entry.is_regular_file()) continue;
            const std::string input = tests::read_file(entry.path());
            INFO(target.name << ": " << entry.path().filename().string());
            const auto start = std::chrono::steady_clock::now();
            CHECK(target.entry(reinterpret_cast<const std::uint8_t*>(input.data()), input.size()) ==
                  0);
            // A hang is a finding too: the slowest regression takes milliseconds.
            CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
            ++replayed;
        }
    }
    CHECK(replayed > 0);
}
