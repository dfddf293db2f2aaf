// All of GPT-2's CPU kernels (forward and backward), for callers that use most of them.
#pragma once

#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
