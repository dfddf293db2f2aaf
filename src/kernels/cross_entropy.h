// Softmax and cross-entropy fused, over rows of V logits (m = max_j logits[i,j] keeps exp finite):
//   forward:  probs[i,j] = e^{logits[i,j]−m} / Σ_k e^{logits[i,k]−m}
//             losses[i]  = log Σ_k e^{logits[i,k]−m} − (logits[i,target_i] − m)   (= −log probs[i,target_i])
//   backward: dlogits[i,j] = dloss·(probs[i,j] − [j = target_i])
#pragma once

#include <cstdint>

#include "core/targets.h"

namespace zerodp::kernels {

// A row whose target is kIgnoreTarget (core/targets.h) predicts nothing: its loss is 0 and its
// dlogits row 0 (its probabilities are still computed).
//
// losses [N]; probs, logits [N,V] (probs may alias logits: softmax in place). Targets must lie in
// [0, V) or be kIgnoreTarget; another is a broken invariant (RuntimeFailure) detected before anything
// is written.
template <class T>
void softmax_crossentropy_forward(T* losses, T* probs, const T* logits, const int32_t* targets, int N,
                                  int V);

// WRITES dlogits (does not accumulate); dlogits may alias probs. dloss is the weight of each row's
// loss in the total loss (e.g. loss_scale / number of tokens in the global batch).
template <class T>
void softmax_crossentropy_backward(T* dlogits, const T* probs, const int32_t* targets, T dloss, int N,
                                   int V);

}  // namespace zerodp::kernels
