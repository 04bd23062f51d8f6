#pragma once
// Bounded capture of one output stream: the first `limit` bytes (head), a ring of the last
// k_tail_bytes after them (tail), a count of every byte, and a count of the lines that
// contain a marker string, including lines split across chunks. Memory is limit +
// k_tail_bytes + the marker's length, whatever the stream's size.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sandbox/run.hpp"

namespace sandbox {

inline constexpr std::string_view k_skip_marker = "SKIP-UNDER-WRAP";

// Counts the lines that contain `marker` in a stream fed chunk by chunk. A line counts once
// however many markers it holds; the last line counts even without a newline.
class MarkerCounter {
public:
    explicit MarkerCounter(std::string_view marker = k_skip_marker);
    void feed(std::string_view chunk);
    std::uint64_t count() const { return m_count; }

private:
    const char* find(const char* data, std::size_t size) const;

    std::string m_marker;
    std::size_t m_anchor = 0;   // the marker's byte least likely in output (find() seeks it)
    std::string m_carry;        // the stream's last marker.size()-1 bytes
    std::string m_joined;       // scratch: the carry and the next chunk's first bytes
    bool m_line_counted = false;  // the current (unterminated) line already counted
    std::uint64_t m_count = 0;
};

class StreamCapture {
public:
    explicit StreamCapture(std::size_t limit);
    void feed(std::string_view chunk);
    std::uint64_t markers() const { return m_markers.count(); }
    // The result so far (head, tail in stream order, byte count, truncated).
    StreamResult result() const;

private:
    void feed_tail(std::string_view chunk);

    std::size_t m_limit;
    std::string m_head;
    std::string m_ring;         // k_tail_bytes once the head is full; m_ring_pos is the oldest
    std::size_t m_ring_pos = 0;
    std::uint64_t m_after_head = 0;  // bytes that did not fit the head
    std::uint64_t m_bytes = 0;
    MarkerCounter m_markers;
};

}  // namespace sandbox
