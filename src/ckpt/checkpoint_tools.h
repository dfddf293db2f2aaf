// What `zerodp ckpt` does with a checkpoint that needs no MPI: turn it into a plain model file, and
// describe it for people.
#pragma once

#include <cstdint>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/model_output.h"

namespace zerodp::ckpt {

// Writes the checkpoint's fp32 weights as a docs/reference/files.md#safetensors model file (every tensor F32 under its
// name, the config as __metadata__, atomically), tensor by tensor through one buffer the size of
// the largest tensor: memory stays near that tensor, not the model. For the same weights these are
// the same bytes as `zerodp train --out` writes.
void consolidate_checkpoint(const Checkpoint& ckpt, const std::string& out_path);

// Writes a checkpoint's weights (GPT-2 or Llama family) as a Hugging Face model directory
// (ckpt/model_output.h: other files in the directory are kept) in `dtype`, shards of at most `shard_bytes`, one unit in memory at a time: the
// same files `zerodp train --out DIR` writes for the same weights.
void consolidate_checkpoint_hf(const Checkpoint& ckpt, const ModelOutput& out, DType dtype, uint64_t shard_bytes);

// The manifest in human terms: what was trained, how it was cut, where training stands, the units
// and their padding, and each rank's file with the ranges it holds.
std::string describe_checkpoint(const Checkpoint& ckpt);

}  // namespace zerodp::ckpt
