# Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#
# The metadata service: cairn::MetadataStore (include/cairn/metadata.h) over Cap'n Proto RPC, so
# that a proxy keeps no durable state of its own. A store node that hosts a metadata store hands
# the service out through StoreNode.metadata (store.capnp). The methods mirror MetadataStore
# exactly: versioned keys, compare-and-swap puts and deletes, kNewKey for "must not exist".
#
# Keys and values are arbitrary bytes (Data), compared bytewise.
#
# Errors: every method fails with the store's absl::Status in the exception description
# ("cairn-status <CODE>: <message>", see net/net_status.h): kNotFound for a missing key, kAborted
# on a version mismatch (the message names the key and both versions), kInvalidArgument for an
# empty or oversize key or value, kUnavailable once the store turned read-only after an I/O
# failure.
#
# Limits, checked by both ends before anything is copied or allocated for the key or value:
#   - a key is 1 to kMaxMetadataKeyBytes = 1024 bytes;
#   - a value is at most kMaxMetadataValueBytes = 4 MiB;
#   - the keys one list returns hold at most kMaxMetadataListBytes = 16 MiB, counting 16 bytes
#     more per key (net/include/cairn/net/limits.h); a larger listing fails with
#     kResourceExhausted instead of sending a reply the client would refuse.

@0xaa9d3bfff34067af;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("cairn::net::rpc");

# Expected version of a put that creates its key (cairn::kNewKey): the key must not exist.
# Real versions start at 1.
const newKey :UInt64 = 0;

interface MetadataService {
  # The key's value and version. kNotFound if it does not exist.
  get @0 (key :Data) -> (value :Data, version :UInt64);

  # Writes `value` if the key's version is `expectedVersion` (newKey: the key must not exist);
  # returns the new version. Durable when it returns. kAborted on a mismatch.
  put @1 (key :Data, value :Data, expectedVersion :UInt64) -> (version :UInt64);

  # Removes the key if its version is `expectedVersion`. kNotFound if it does not exist,
  # kAborted on a mismatch. Durable when it returns.
  delete @2 (key :Data, expectedVersion :UInt64) -> ();

  # Keys starting with `prefix`, ascending (bytewise).
  list @3 (prefix :Data) -> (keys :List(Data));
}
