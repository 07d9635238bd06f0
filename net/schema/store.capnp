# Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#
# The store-node protocol: what one store node (a "bookie") offers over Cap'n Proto RPC. A node
# serves one cairn::Store; its ledgers keep their local semantics (one writer, dense entry ids
# from 0, last-add-confirmed, seal, fence), which is what the replication layer will build on:
# a proxy writes each entry to several nodes and fences a ledger on enough of them to take it
# over. docs/network.md describes the threading and the limits.
#
# Errors: every method fails with the store's absl::Status carried in the exception description
# ("cairn-status <CODE>: <message>", see net/net_status.h), so a client sees kFailedPrecondition,
# kNotFound, kDataLoss, ... with the message the store produced.
#
# Limits (net/include/cairn/net/limits.h holds the same numbers as named constants):
#   - One RPC message (a frame) is at most kMaxMessageBytes = 32 MiB. Both ends refuse a larger
#     frame from its header, before allocating it (Cap'n Proto's traversal limit).
#   - `batch` in LedgerWriter.append is one batch of at most 16 MiB (cairn::kMaxBatchBytes).
#   - `maxBytes` of LedgerReader.read is clamped to kMaxReadBytes = 8 MiB; a read still returns
#     at least one whole batch, so a reply is at most 8 MiB + 16 MiB.
#   - A node reads no further calls from a connection while that connection's calls in progress
#     hold more than kMaxConnectionInFlightBytes = 64 MiB of parameters (flow limit).
#   - Appends the node has handed to its store and not yet seen complete hold at most the store's
#     max_in_flight_bytes; appends beyond that queue on the node in arrival order.
#   - waitForEntry waits at most kMaxWaitSliceUs = 1 s per call; clients wait longer by calling
#     again.

@0xf0e98d05e4cef990;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("cairn::net::rpc");

using Metadata = import "metadata.capnp";

# The last-add-confirmed of a ledger with no entries (cairn::kNoEntry).
const noEntry :UInt64 = 0xffffffffffffffff;

struct LedgerInfo {
  id @0 :UInt64;
  sealed @1 :Bool;
  fenced @2 :Bool;
  lastAddConfirmed @3 :UInt64;   # noEntry if the ledger is empty
  sizeBytes @4 :UInt64;
  segmentCount @5 :UInt32;
}

interface StoreNode {
  # Creates an empty, open ledger. With hasId, under `id` (kAlreadyExists if taken); otherwise
  # the store assigns one. Durable when it returns.
  createLedger @0 (id :UInt64, hasId :Bool) -> (id :UInt64);

  # Ids of all ledgers, ascending.
  listLedgers @1 () -> (ids :List(UInt64));

  getLedgerInfo @2 (id :UInt64) -> (info :LedgerInfo);

  # kFailedPrecondition while a writer or reader has the ledger open (on this node, from any
  # connection).
  deleteLedger @3 (id :UInt64) -> ();

  # Takes the right to append away from the ledger's writer, durably; returns the LAC at the
  # moment of fencing.
  fence @4 (id :UInt64) -> (lastAddConfirmed :UInt64);

  # The ledger's single writer (kFailedPrecondition if it is sealed, fenced or already has one).
  # The writer is released when the capability is dropped (or the connection closes), after its
  # appends in flight complete.
  openWriter @5 (id :UInt64) -> (writer :LedgerWriter, lastAddConfirmed :UInt64);

  # A reader; any number may be open.
  openReader @6 (id :UInt64) -> (reader :LedgerReader, lastAddConfirmed :UInt64, sealed :Bool);

  # The metadata store this node hosts (metadata.capnp). kFailedPrecondition "this store node
  # serves no metadata" if it hosts none.
  metadata @7 () -> (service :Metadata.MetadataService);

  # Whether an acknowledged append is durable (a crash cannot take it back): true for a store
  # in sync durability, false for async (cairn::LedgerSet::acknowledged_means_durable). A client
  # asks once, when it connects. A node from before this method answers it as unimplemented,
  # which a client takes as false: a sealed ledger is durable either way.
  durability @8 () -> (acknowledgedMeansDurable :Bool);

  # The replicas this node holds of replicated ledgers (cairn/replica_store.h, and
  # docs/replication.md for the protocol). A node started without replicas answers these with
  # kFailedPrecondition. Adds on one connection are stored in the order they are sent.
  replicaAdd @9 (ledger :UInt64, batch :Data, lastAddConfirmed :UInt64, recovery :Bool,
                 rereplication :Bool) -> ();
  # Never fails for a missing or unreadable entry: the answer's outcome says which of the three
  # it is (an unknown one with the node's status in statusCode/statusMessage).
  #
  # Reading ahead (`aheadBytes` > 0, without `fence`): the answer's `more` also holds the batches
  # that follow the entry's batch on this node, in entry order without a gap, none past
  # `aheadLast`, about min(aheadBytes, kMaxReadBytes) in all: a run of batches in one request.
  # It stops at the first entry that is not present here.
  replicaRead @10 (ledger :UInt64, entry :UInt64, fence :Bool, aheadBytes :UInt64,
                   aheadLast :UInt64) -> (read :ReplicaReadAnswer);
  replicaFence @11 (ledger :UInt64) -> (lastAddConfirmed :UInt64);
  replicaReadLac @12 (ledger :UInt64) -> (lastAddConfirmed :UInt64);
  replicaWriteLac @13 (ledger :UInt64, lastAddConfirmed :UInt64) -> ();
  replicaClose @14 (ledger :UInt64, lastEntry :UInt64) -> ();
  replicaDelete @15 (ledger :UInt64) -> ();
  replicaList @16 () -> (replicas :List(ReplicaSummary));

  # Answered at once, touching nothing: the heartbeat of the node's clients
  # (net/client/heartbeat.h), which tells a node that stopped answering from one that is idle.
  ping @17 () -> ();

  # Security (docs/security.md). On a node that requires authentication (cairnd store
  # --auth-token-secret-file), every call but ping and authenticate fails with kUnauthenticated
  # until this connection authenticated with a token, and with kPermissionDenied unless the
  # token's role is one of the node's cluster roles (proxy, autorecovery, admin by default).
  # A token that is not valid now fails with kUnauthenticated; a valid one of another role with
  # kPermissionDenied, and the connection then acts as that role. Answers the role, and when the
  # token expires (seconds since the epoch); on a node without authentication, an empty role.
  # The writers, readers and metadata service a node hands out are reached through checked
  # calls only.
  authenticate @18 (token :Text) -> (role :Text, expiresAtS :Int64);
}

enum ReplicaReadOutcome {
  present @0;
  absent @1;
  unknown @2;
}

struct ReplicaReadAnswer {
  outcome @0 :ReplicaReadOutcome;
  batch @1 :Data;                # present: the batch holding the entry
  lastAddConfirmed @2 :UInt64;   # the highest the node was told
  statusCode @3 :UInt32;         # unknown: an absl::StatusCode
  statusMessage @4 :Text;
  more @5 :List(Data);           # present, reading ahead: the batches after `batch`
}

struct ReplicaSummary {
  ledger @0 :UInt64;
  firstEntries @1 :List(UInt64);  # each range's first entry
  endEntries @2 :List(UInt64);    # and the entry after its last
  fenced @3 :Bool;
  closed @4 :Bool;
  limbo @5 :Bool;
  lastAddConfirmed @6 :UInt64;
  sizeBytes @7 :UInt64;
}

interface LedgerWriter {
  # Appends one batch in its wire form (as BatchBuilder::Finish made it, with any ledger id and
  # entry ids). The node verifies it (kDataLoss if damaged, kInvalidArgument if not exactly one
  # batch or over a limit), restamps it with this ledger and the next entry ids, and replies when
  # the store acknowledges it (durable under sync durability). Calls on one writer are appended
  # in the order they are sent, so a client may pipeline many; replies come back in that order.
  # `lastAddConfirmed` is the writer's LAC when the reply left: at least lastEntryId.
  append @0 (batch :Data) -> (firstEntryId :UInt64, lastEntryId :UInt64,
                              lastAddConfirmed :UInt64);

  # Waits for every append sent before it; fails with the first error among those since the
  # last flush, if any.
  flush @1 () -> ();

  # Waits for the appends sent before it, then seals the ledger durably at its last acknowledged
  # entry (noEntry if empty). Appends that arrive while sealing, and later, fail with
  # kFailedPrecondition.
  seal @2 () -> (lastEntryId :UInt64);

  lastAddConfirmed @3 () -> (lastAddConfirmed :UInt64);
}

interface LedgerReader {
  # Whole batches, laid end to end, starting with the batch that holds `fromEntry`, never past
  # the LAC; at most `maxEntries` entries and `maxBytes` bytes, except that at least one whole
  # batch is returned. The client verifies every batch again. kOutOfRange if fromEntry is past
  # the LAC.
  read @0 (fromEntry :UInt64, maxEntries :UInt64, maxBytes :UInt64)
      -> (batches :Data, nextEntryId :UInt64, lastAddConfirmed :UInt64, sealed :Bool);

  # Waits until `entry` is confirmed, the ledger is sealed or fenced, or min(timeoutUs,
  # kMaxWaitSliceUs) passes; returns the LAC then (possibly below `entry`, or noEntry).
  waitForEntry @1 (entry :UInt64, timeoutUs :UInt64) -> (lastAddConfirmed :UInt64, sealed :Bool);

  # The first entry of the first batch whose entries, or earlier ones, carry a timestamp >=
  # timestampUs. kOutOfRange if there is none.
  seekByTime @2 (timestampUs :Int64) -> (entryId :UInt64);

  state @3 () -> (lastAddConfirmed :UInt64, sealed :Bool);
}
