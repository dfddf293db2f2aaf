// ZDP_HD (core/hd.h): the functions kernels and host code share, covered by the CPU test suite
// (tests/cuda/) on machines without a GPU.
#pragma once

#include "core/hd.h"
