#pragma once
// Text the CLI commands write to their terminal: error messages flattened to one line, and
// bytes copied to an fd whole.

#include <string>
#include <string_view>

namespace agent {

// `text` on one line: each '\n' and '\r' becomes a space, trailing spaces are dropped.
std::string one_line(std::string text);

enum class WriteOutcome { written, reader_gone };

// Writes all of `bytes` to `fd`, retrying short writes and EINTR. reader_gone when a write
// fails or writes nothing (a closed pipe: SIGPIPE must be ignored by the caller); the rest of
// `bytes` is then dropped.
WriteOutcome write_all(int fd, std::string_view bytes);

}  // namespace agent
