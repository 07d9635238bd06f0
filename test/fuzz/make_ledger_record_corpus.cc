// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Writes the seed corpus of the replicated ledger record decoder fuzzer: records in each state,
// with one and many fragments, the widest ensemble and longest addresses, and a few damaged
// ones. Run it again after a change to the format:
//
//   make_ledger_record_corpus test/fuzz/corpus/ledger_record_decoder

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cairn/replication.h"

namespace {

using cairn::Fragment;
using cairn::ReplicatedLedgerRecord;
using cairn::ReplicatedLedgerState;

std::string g_directory;
int g_files = 0;

void Write(const std::string& name, const std::string& bytes) {
  const std::string path = g_directory + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() ||
      std::fclose(file) != 0) {
    std::fprintf(stderr, "make_ledger_record_corpus: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  ++g_files;
}

ReplicatedLedgerRecord ThreeNodes() {
  ReplicatedLedgerRecord record;
  record.ledger_id = 42;
  record.config = {.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 2};
  record.fragments = {
      {.first_entry_id = 0, .nodes = {"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}},
      {.first_entry_id = 1000, .nodes = {"10.0.0.1:7000", "10.0.0.4:7000", "10.0.0.3:7000"}}};
  record.created_us = 1'700'000'000'000'000;
  return record;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
    return 1;
  }
  g_directory = argv[1];

  const ReplicatedLedgerRecord open = ThreeNodes();
  Write("valid_open", cairn::EncodeReplicatedLedgerRecord(open));

  ReplicatedLedgerRecord recovering = open;
  recovering.state = ReplicatedLedgerState::kInRecovery;
  Write("valid_in_recovery", cairn::EncodeReplicatedLedgerRecord(recovering));

  ReplicatedLedgerRecord closed = open;
  closed.state = ReplicatedLedgerState::kClosed;
  closed.last_entry_id = 1234;
  Write("valid_closed", cairn::EncodeReplicatedLedgerRecord(closed));

  ReplicatedLedgerRecord empty;
  empty.config = {.ensemble_size = 1, .write_quorum = 1, .ack_quorum = 1};
  empty.state = ReplicatedLedgerState::kClosed;
  empty.fragments = {{.first_entry_id = 0, .nodes = {"n"}}};
  Write("valid_closed_empty", cairn::EncodeReplicatedLedgerRecord(empty));

  ReplicatedLedgerRecord wide;
  wide.config = {.ensemble_size = cairn::kMaxEnsembleSize,
                 .write_quorum = cairn::kMaxEnsembleSize,
                 .ack_quorum = 9};
  Fragment fragment;
  for (uint32_t n = 0; n < cairn::kMaxEnsembleSize; ++n) {
    fragment.nodes.push_back(std::string(cairn::kMaxNodeAddressBytes, static_cast<char>('a' + n)));
  }
  wide.fragments = {fragment};
  Write("valid_widest_ensemble", cairn::EncodeReplicatedLedgerRecord(wide));

  ReplicatedLedgerRecord many = open;
  many.fragments.clear();
  for (uint64_t f = 0; f < 64; ++f) {
    many.fragments.push_back({.first_entry_id = f * f, .nodes = {"a", "b", "c"}});
  }
  Write("valid_many_fragments", cairn::EncodeReplicatedLedgerRecord(many));

  std::string flipped = cairn::EncodeReplicatedLedgerRecord(open);
  flipped[30] ^= 0x04;
  Write("bad_bit_flip", flipped);
  const std::string whole = cairn::EncodeReplicatedLedgerRecord(many);
  Write("bad_truncated", whole.substr(0, whole.size() / 2));
  Write("bad_trailing_byte", cairn::EncodeReplicatedLedgerRecord(open) + "x");
  ReplicatedLedgerRecord repeated = open;
  repeated.fragments[1].nodes[1] = "10.0.0.1:7000";
  Write("bad_repeated_node", cairn::EncodeReplicatedLedgerRecord(repeated));
  Write("bad_empty", "");

  std::printf("wrote %d files to %s\n", g_files, g_directory.c_str());
  return 0;
}
