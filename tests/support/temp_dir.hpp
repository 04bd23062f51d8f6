#pragma once
// A fresh temp dir per test: removed when the test case passes, kept (and its path printed)
// when it fails, so the evidence survives.

#include <filesystem>
#include <string_view>

namespace tests {

enum class Outcome { passed, failed };

// Creates a new directory under $TMPDIR (or /tmp) named sandgate-test-<label>-XXXXXX. The
// directory lives until the current test case ends.
std::filesystem::path make_temp_dir(std::string_view label = "t");

// Called by the Catch2 listener when a test case ends.
void finish_temp_dirs(Outcome outcome);

// Writes `content` to `path`, creating parent directories.
void write_file(const std::filesystem::path& path, std::string_view content);
std::string read_file(const std::filesystem::path& path);

}  // namespace tests
