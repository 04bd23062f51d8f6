#pragma once
// Secret masking for everything a step shows: the live log, annotations, summaries, outputs
// printed in logs and report text. Follows actions/runner's SecretMasker
// (src/Sdk/DTLogging/Logging/SecretMasker.cs, Runner.Worker/Worker.cs):
//  - a secret is trimmed; empty or whitespace-only values are never registered (masking the
//    empty string would mask nothing and everything);
//  - a multi-line secret is registered whole and line by line (lines split on CR/LF, each
//    trimmed), because a step's output is masked a line at a time; derived lines shorter than
//    k_min_derived_secret_length are not registered (actions/runner PR 2578: a lone `}` of a
//    JSON secret must not blank every brace in the log);
//  - the encodings a secret commonly leaks in are registered too, as the runner's ValueEncoders
//    do: base64 at all three byte alignments (the secret after a prefix of any length, as in
//    base64("user:" + secret) for Basic auth), JSON string escape, URL escape, XML escape,
//    command-line (\") and expression ('') escapes, the runner's TrimDoubleQuotes, and the
//    shell-quoted forms ('\'' inside single quotes, printf %q's backslashes);
//  - overlapping and adjacent matches merge and each merged range becomes `***`.
// Masking applies from the moment a value is added: add_secret() is visible to every later
// mask() call, from any thread.

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/token_provider.hpp"

namespace jobs {

inline constexpr std::string_view k_mask = "***";
inline constexpr std::size_t k_min_derived_secret_length = 4;

class Masker {
public:
    // Registers a secret value (and its lines and encodings). Returns false when nothing was
    // registered (empty or whitespace-only value). Thread-safe.
    bool add_secret(std::string_view value);

    // `text` with every registered value replaced by `***`. Thread-safe.
    std::string mask(std::string_view text) const;

    // True when `text` contains a registered value (the runner skips job outputs that do).
    bool contains_secret(std::string_view text) const;

    // Number of registered values (whole, derived and encoded).
    std::size_t size() const;

private:
    void add_value_locked(std::string value);
    template <typename OnMatch>
    void scan(std::string_view text, OnMatch&& on_match) const;

    mutable std::shared_mutex m_mutex;
    std::vector<std::string> m_values;
    // One pass over the text instead of one per value: candidates by first byte, and a
    // filter on the first two bytes that rejects most positions without a comparison.
    std::array<std::vector<std::uint32_t>, 256> m_by_first;
    std::bitset<65536> m_first_two;
    std::bitset<256> m_single_byte;  // values of length 1 (a whole secret may be that short)
};

// A token provider (common/token_provider.hpp) whose every token is registered with `masker`
// before it is handed out, so that a token minted again mid-run is masked like the first.
// `masker` is borrowed and must outlive this; errors are the inner provider's.
class MaskedTokens final : public common::TokenProvider {
public:
    MaskedTokens(std::shared_ptr<common::TokenProvider> inner, Masker& masker);
    common::Expected<std::string> token() override;
    common::Renewal refused(std::string_view token) override;

private:
    std::shared_ptr<common::TokenProvider> m_inner;
    Masker& m_masker;
};

// Splits a byte stream arriving in arbitrary chunks into lines (LF, with a CR before it
// dropped), so that masking and command parsing always see whole lines. A line longer than
// `max_line` bytes is delivered in max_line pieces (bounded memory; a secret straddling such
// a cut is the one case not masked). flush() delivers an unterminated last line.
class LineSplitter {
public:
    using Sink = std::function<void(std::string_view line)>;

    explicit LineSplitter(Sink sink, std::size_t max_line = 1024 * 1024);
    void feed(std::string_view chunk);
    void flush();

private:
    void deliver(std::string_view line);

    Sink m_sink;
    std::size_t m_max_line;
    std::string m_pending;
};

}  // namespace jobs
