#pragma once
// One fuzz target per parser of untrusted input (fuzz/targets/*.cpp). A target is written once
// with SANDGATE_FUZZ_TARGET(name) and built two ways:
//  - with SANDGATE_LIBFUZZER (fuzz/CMakeLists.txt, clang -fsanitize=fuzzer,address,undefined):
//    it is that binary's LLVMFuzzerTestOneInput;
//  - otherwise (tests/integration/test_fuzz_regressions.cpp, the regular build): it registers
//  itself, and
//    the regression test replays every input of fuzz/regressions/<name>/ through it.
// A target returns 0; a broken invariant (a crash, or check() failing) is the finding.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fuzz {

using Entry = int (*)(const std::uint8_t* data, std::size_t size);

struct Registration {
    Registration(const char* name, Entry entry);
};

// The registered targets, in name order (regular build only).
struct Target {
    const char* name;
    Entry entry;
};
std::size_t target_count();
Target target_at(std::size_t index);

// Aborts with `what` when `condition` is false: a property every input must keep.
void check(bool condition, const char* what);

// A refusal must be one printable line (GitHub's file:line:col: message form).
void check_one_line(std::string_view message);

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace fuzz

#ifdef SANDGATE_LIBFUZZER
#define SANDGATE_FUZZ_TARGET(name) \
    extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
#else
#define SANDGATE_FUZZ_TARGET(name)                                                         \
    static int fuzz_target_##name(const std::uint8_t* data, std::size_t size);             \
    static const ::fuzz::Registration fuzz_registration_##name(#name, fuzz_target_##name); \
    static int fuzz_target_##name(const std::uint8_t* data, std::size_t size)
#endif
