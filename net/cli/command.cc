// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The list of subcommands and their help.
#include "command.h"

namespace cairn::cli {
namespace {

// What opening a store does, which every command that opens one does too.
#define CAIRN_CLI_OPEN_NOTE                                                                     \
  "Opening a store runs the same recovery as an application starting up: a torn tail (the\n"    \
  "write in progress when a process stopped) is truncated, a create or delete interrupted by\n" \
  "a crash is finished, a damaged index of a finished segment is rebuilt from its segment,\n"   \
  "and the journal, if given, is replayed into the segments. Closing the store afterwards\n"    \
  "writes the index checkpoints and the clean-shutdown marker that any clean shutdown\n"        \
  "writes. Nothing else is changed: damage that is not a torn tail is never truncated or\n"     \
  "removed; it makes the open fail, and then nothing more is written (what recovery had\n"      \
  "already done to other ledgers stays done). The store must not be in use: a store held\n"     \
  "open by a running process is refused (exit status 2).\n"

const Command kCommands[] = {
    {
        .name = "verify",
        .summary = "Check every batch of a store against its checksum and batch index",
        .usage = "cairn verify --data-dir DIR [--data-dir DIR2 ...] [--journal-dir DIR] [--json]",
        .details =
            "Opens the store, reads every acknowledged batch of every ledger and checks it\n"
            "against its checksum and its batch index record (ledger id, entry ids, size,\n"
            "contiguity), and every segment header and index file. Prints what was checked and\n"
            "each damaged range by ledger, entry range, file and offset. Damage that stops the\n"
            "store from opening at all (an invalid batch followed by valid ones, a damaged\n"
            "metadata file) is reported as damage too, with the reason.\n"
            "\n" CAIRN_CLI_OPEN_NOTE "\n"
            "On a terminal, a progress line (bytes checked of the total, and the rate) is shown\n"
            "on standard error.\n"
            "\n"
            "Exit status: 0 no damage, 1 damage found, 2 usage error or the check could not run\n"
            "(missing directory, not a store, store in use, I/O error).\n",
        .flags = {{"data_dir", "DIR", true}, {"journal_dir", "DIR", false}, {"json", "", false}},
        .examples = {"cairn verify --data-dir /var/lib/app/log",
                     "cairn verify --data-dir /disk1/log --data-dir /disk2/log "
                     "--journal-dir /ssd/journal --json"},
        .run = RunVerify,
    },
    {
        .name = "ledgers",
        .summary = "List the ledgers of a store: state, last add confirmed, size, segments",
        .usage = "cairn ledgers --data-dir DIR [--data-dir DIR2 ...] [--journal-dir DIR] [--json]",
        .details = "Opens the store and lists its ledgers in id order: state (open or sealed),\n"
                   "whether it is fenced, the last add confirmed (LAC: the last acknowledged\n"
                   "entry), the number of entries, bytes stored and segment files.\n"
                   "\n" CAIRN_CLI_OPEN_NOTE "\n"
                   "Exit status: 0 listed, 1 the store is damaged and cannot be opened (see\n"
                   "`cairn verify`), 2 usage error or the store could not be opened otherwise.\n",
        .flags = {{"data_dir", "DIR", true}, {"journal_dir", "DIR", false}, {"json", "", false}},
        .examples = {"cairn ledgers --data-dir /var/lib/app/log",
                     "cairn ledgers --data-dir /var/lib/app/log --json"},
        .run = RunLedgers,
    },
};

#undef CAIRN_CLI_OPEN_NOTE

}  // namespace

std::span<const Command> Commands() { return kCommands; }

}  // namespace cairn::cli
