// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// XXH3-64 built for AVX2, for the payload hash of batches (PayloadHash in batch.cc calls it when
// the CPU has AVX2). XXH3's result does not depend on the instructions that compute it; the
// shared library's build uses SSE2, which hashes at about a third of this speed.
//
// This file is compiled with -mavx2, so it includes nothing but xxhash.h, whose functions are
// all static here (XXH_INLINE_ALL): no inline function of a shared header may be compiled with
// AVX2 in it and then chosen by the linker for code that runs on any CPU.
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

namespace cairn::internal {

unsigned long long PayloadHashAvx2(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

}  // namespace cairn::internal
