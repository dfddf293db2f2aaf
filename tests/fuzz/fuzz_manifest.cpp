// libFuzzer target: a checkpoint's manifest.json, from text to a validated Manifest, through
// zerodp::ckpt::parse_manifest, the entry point ckpt::Checkpoint reads manifests with (bounded JSON
// parsing, then every check of manifest_from_json). The CRC line in front of it is not fuzzed: it
// only guards against corruption, not against a hostile writer.
//
// An accepted manifest must survive the trip a save makes: written out by manifest_to_json (as
// text, with dump(2) like the saver) and read back, it must be accepted again and say the same.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ckpt/manifest.h"
#include "fuzz/fuzz_common.h"

namespace {

constexpr const char* kLabel = "fuzz/manifest.json";

zerodp::ckpt::Manifest manifest_from_text(std::string_view text) {
  return zerodp::ckpt::parse_manifest(text, kLabel);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  zerodp::fuzz::only_zerodp_errors("manifest", [&] {
    const zerodp::ckpt::Manifest m = manifest_from_text(text);
    const std::string written = zerodp::ckpt::manifest_to_json(m).dump(2) + "\n";
    zerodp::ckpt::Manifest again;
    try {
      again = manifest_from_text(written);
    } catch (const zerodp::Error& e) {
      std::fprintf(stderr, "fuzz_manifest: re-reading the written manifest: %s\n", e.what());
      zerodp::fuzz::property_failed("manifest", "an accepted manifest, written out, is refused");
    }
    if (zerodp::ckpt::manifest_to_json(again) != zerodp::ckpt::manifest_to_json(m))
      zerodp::fuzz::property_failed("manifest", "an accepted manifest, written out and read back, differs");
  });
  return 0;
}
