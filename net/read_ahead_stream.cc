// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/read_ahead_stream.h"

#include <algorithm>
#include <cstring>

namespace cairn::net::internal {

ReadAheadStream::ReadAheadStream(kj::Own<kj::AsyncIoStream> inner, size_t buffer_bytes)
    : inner_(kj::mv(inner)), buffer_(kj::heapArray<kj::byte>(std::max<size_t>(buffer_bytes, 1))) {}

kj::Promise<size_t> ReadAheadStream::tryRead(void* buffer, size_t minBytes, size_t maxBytes) {
  kj::byte* out = static_cast<kj::byte*>(buffer);
  const size_t done = TakeBuffered(out, 0, maxBytes);
  if (done >= minBytes) return done;
  return ReadOn(out, done, minBytes, maxBytes);
}

void ReadAheadStream::NoteFirst(const kj::byte* data, size_t n) {
  for (size_t i = 0; i < n && bytes_read_ + i < sizeof(first_); ++i) first_[bytes_read_ + i] = data[i];
}

size_t ReadAheadStream::TakeBuffered(kj::byte* out, size_t done, size_t max) {
  const size_t n = std::min(end_ - begin_, max - done);
  if (n > 0) {
    std::memcpy(out + done, buffer_.begin() + begin_, n);
    begin_ += n;
    done += n;
  }
  if (begin_ == end_) begin_ = end_ = 0;
  return done;
}

kj::Promise<size_t> ReadAheadStream::ReadOn(kj::byte* out, size_t done, size_t min, size_t max) {
  // Only called with the buffer empty: what it held went to `out` first.
  if (max - done >= buffer_.size()) {
    // Large: straight into the caller's memory, no further than asked.
    return inner_->tryRead(out + done, min - done, max - done).then([this, out, done](size_t n) {
      NoteFirst(out + done, n);
      bytes_read_ += n;
      return done + n;
    });
  }
  return inner_->tryRead(buffer_.begin(), 1, buffer_.size())
      .then([this, out, done, min, max](size_t n) -> kj::Promise<size_t> {
        if (n == 0) return done;  // The stream ended.
        NoteFirst(buffer_.begin(), n);
        bytes_read_ += n;
        begin_ = 0;
        end_ = n;
        const size_t now = TakeBuffered(out, done, max);
        if (now >= min) return now;
        return ReadOn(out, now, min, max);
      });
}

}  // namespace cairn::net::internal
