#pragma once
// Bounded capture of one output stream: the first `limit` bytes (head), a ring holding the
// last k_tail_bytes after them (tail), a count of every byte, and a count of the lines that
// contain a marker string, including lines split across chunks. Memory is at most limit +
// k_capture_ring_bytes + the marker's length, whatever the stream's size.
//
// The reader reads straight into the capture (read_buffer(), then commit()): the bytes land
// in the head or the ring where they are kept, with no copy between a read buffer and the
// capture (on a 1 GiB stream that copy cost as much as the kernel's own).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sandbox/process/run.hpp"

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
    std::size_t m_anchor = 0;     // the marker's byte least likely in output (find() seeks it)
    std::string m_carry;          // the stream's last marker.size()-1 bytes
    std::string m_joined;         // scratch: the carry and the next chunk's first bytes
    bool m_line_counted = false;  // the current (unterminated) line already counted
    std::uint64_t m_count = 0;
};

// The ring the bytes after the head are read into; its last k_tail_bytes are the tail. Larger
// than the tail so that one read can take up to this much.
inline constexpr std::size_t k_capture_ring_bytes = 256 * 1024;
static_assert(k_capture_ring_bytes >= k_tail_bytes);

class StreamCapture {
public:
    explicit StreamCapture(std::size_t limit);
    // Where the next bytes of the stream go: never empty, at most k_capture_ring_bytes. Valid
    // until the next call on this capture.
    std::span<char> read_buffer();
    // The first `n` bytes of the last read_buffer() now hold the stream's next bytes; returns
    // them (valid until the next call on this capture).
    std::string_view commit(std::size_t n);
    // read_buffer() and commit() for bytes that are already in memory.
    void feed(std::string_view chunk);
    std::uint64_t markers() const { return m_markers.count(); }
    // The result so far (head, tail in stream order, byte count, truncated).
    StreamResult result() const;

private:
    std::size_t m_limit;
    std::unique_ptr<char[]> m_head;  // `limit` bytes, allocated on first use
    std::size_t m_head_size = 0;
    std::unique_ptr<char[]> m_ring;  // k_capture_ring_bytes, allocated once the head is full
    std::size_t m_ring_pos = 0;      // next write; the newest byte is just before it
    std::uint64_t m_after_head = 0;  // bytes that did not fit the head
    std::uint64_t m_bytes = 0;
    MarkerCounter m_markers;
};

}  // namespace sandbox
