// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The event loop of every cairn process that speaks Cap'n Proto: the daemons' main threads and
// the client's network thread.
#pragma once

#include "kj/async-io.h"

namespace cairn::net {

// Events the loop runs in a row before it looks at I/O and at events from other threads again.
//
// KJ's loop runs the events it has queued until none is left, and only then polls for I/O and
// for what other threads sent it (the store's completions, the client's posted sends). A
// connection whose data keeps arriving keeps the queue from ever emptying: each read completes
// at once and queues the next. Under a steady stream of sends, the proxy's loop left the store's
// completions waiting 5 to 40 ms on average (max 0.5 s); sends held in the meantime filled its
// in-flight budget, and the store sat idle between rounds with one append queued. Polling every
// 16 events brought the wait to about 1 ms, at the cost of one epoll_wait with no timeout per 16
// events.
inline constexpr unsigned kBusyPollEvents = 16;

// kj::setupAsyncIo(), with the loop set to poll every kBusyPollEvents events.
inline kj::AsyncIoContext SetUpEventLoop() {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  io.waitScope.setBusyPollInterval(kBusyPollEvents);
  return io;
}

}  // namespace cairn::net
