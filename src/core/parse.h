// Numbers, switches and sizes from text (flags, environment variables, CLI arguments): one place
// that decides what "5e8", " 12 ", "yes" or "512MiB" mean, so every command reads them alike.
//
// The try_* functions return nullopt for text that is not the thing asked for; the others throw a
// UsageError naming `what` (the flag or key: "--lr: expected a number, got 'x'").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace zerodp {

// `s` without leading and trailing ASCII white space.
std::string_view trim(std::string_view s);

// A finite number, with an optional leading '+'.
std::optional<double> try_parse_double(std::string_view text);
// An integer, also written with an exponent when its value is whole ("5e8").
std::optional<int64_t> try_parse_int(std::string_view text);
// true/false, 1/0, yes/no, on/off (any case).
std::optional<bool> try_parse_bool(std::string_view text);

int64_t parse_int(std::string_view text, std::string_view what);
int parse_int32(std::string_view text, std::string_view what);  // also in int's range
uint64_t parse_uint(std::string_view text, std::string_view what);  // digits only, no sign or exponent
double parse_number(std::string_view text, std::string_view what);
bool parse_bool(std::string_view text, std::string_view what);

// "8GB" (8·10^9), "512MiB" (512·2^20), "4G" (4·2^30: a lone K/M/G/T is binary), "1e9", "1000":
// a byte count in [1, 2^64). Case-insensitive unit, optional space before it.
uint64_t parse_bytes(std::string_view text, std::string_view what);

}  // namespace zerodp
