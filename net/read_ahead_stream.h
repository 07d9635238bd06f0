// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A stream whose small reads are served from a buffer filled ahead.
//
// Cap'n Proto reads a message in pieces, each its own read of the stream: the first word (8
// bytes), the rest of the segment table if any, then the segments. On a socket every piece is a
// read(2), so a small message (a call's Finish, a Return) cost two system calls, and a batch sent
// through the proxy about six on the daemon's side. This wrapper turns a read asking for less
// than its buffer into one read of up to the buffer's size, and serves the next reads from what
// came along: the rest of that message and often the next ones. A read at least as large as the
// buffer (a batch's segment) takes what is buffered and reads the rest straight into the
// caller's memory, so that a batch is copied no more than before, apart from the buffer's worth.
//
// Everything but reading passes through to the wrapped stream. Event-loop only, like the stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kj/array.h"
#include "kj/async-io.h"

namespace cairn::net::internal {

class ReadAheadStream final : public kj::AsyncIoStream {
 public:
  static constexpr size_t kDefaultBufferBytes = 16 << 10;

  explicit ReadAheadStream(kj::Own<kj::AsyncIoStream> inner,
                           size_t buffer_bytes = kDefaultBufferBytes);

  kj::Promise<size_t> tryRead(void* buffer, size_t minBytes, size_t maxBytes) override;

  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }
  void getsockopt(int level, int option, void* value, kj::uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, kj::uint length) override {
    inner_->setsockopt(level, option, value, length);
  }
  void getsockname(struct sockaddr* addr, kj::uint* length) override {
    inner_->getsockname(addr, length);
  }
  void getpeername(struct sockaddr* addr, kj::uint* length) override {
    inner_->getpeername(addr, length);
  }
  kj::Maybe<int> getFd() const override { return inner_->getFd(); }

  // Bytes read from the wrapped stream and not yet handed out.
  size_t buffered() const { return end_ - begin_; }
  // Bytes read from the wrapped stream so far: grows while the peer is sending, which proves it
  // alive even when an answer it owes is queued behind what it sends.
  uint64_t bytes_read() const { return bytes_read_; }
  // Whether the peer's first bytes are those of a TLS handshake record (0x16 0x03): a TLS
  // client talking to a server without TLS.
  bool began_like_tls() const { return first_[0] == 0x16 && first_[1] == 0x03; }

 private:
  // Keeps what of data[0, n), read after bytes_read_ bytes, falls in the first two.
  void NoteFirst(const kj::byte* data, size_t n);
  // Moves buffered bytes to out[done, max); returns the new `done`.
  size_t TakeBuffered(kj::byte* out, size_t done, size_t max);
  // Reads on until `min` bytes of out[0, max) are filled (or the stream ended), `done` already.
  kj::Promise<size_t> ReadOn(kj::byte* out, size_t done, size_t min, size_t max);

  kj::Own<kj::AsyncIoStream> inner_;
  kj::Array<kj::byte> buffer_;
  size_t begin_ = 0;  // buffer_[begin_, end_) was read and not handed out
  size_t end_ = 0;
  uint64_t bytes_read_ = 0;
  kj::byte first_[2] = {0, 0};  // the first two bytes read, once read
};

}  // namespace cairn::net::internal
