#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_target.hpp"

namespace fuzz {
namespace {

std::vector<Target>& registry() {
    static std::vector<Target> targets;
    return targets;
}

}  // namespace

Registration::Registration(const char* name, Entry entry) {
    auto& targets = registry();
    targets.push_back({name, entry});
    std::ranges::sort(
        targets, [](const Target& a, const Target& b) { return std::strcmp(a.name, b.name) < 0; });
}

std::size_t target_count() {
    return registry().size();
}
Target target_at(std::size_t index) {
    return registry().at(index);
}

void check(bool condition, const char* what) {
    if (condition) return;
    std::fprintf(stderr, "fuzz: broken invariant: %s\n", what);
    std::abort();
}

void check_one_line(std::string_view message) {
    check(!message.empty(), "a refusal has a message");
    for (char c : message) {
        const auto byte = static_cast<unsigned char>(c);
        check(byte >= 0x20 && byte != 0x7f, "a refusal is one printable line");
    }
}

}  // namespace fuzz
