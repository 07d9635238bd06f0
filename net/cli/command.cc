// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The list of subcommands and their help.
#include "command.h"

#include <algorithm>
#include <iterator>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"

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

const Command kCommandsAsWritten[] = {
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
    {
        .name = "replicated-ledgers",
        .summary = "Show replicated ledgers' records: state, quorums, fragments and their nodes",
        .usage = "cairn replicated-ledgers --metadata ADDRESS [--ledger ID] [--json]",
        .details =
            "Reads the records of replicated ledgers from the metadata store (the keys under\n"
            "ledgers/replicated/, one per ledger, its id in 16 hex digits) and changes nothing.\n"
            "ADDRESS is a store node's metadata service, host:port (cairnd store hosts one\n"
            "unless started with --metadata-dir none), or a ZooKeeper ensemble,\n"
            "zk://host:port[,host:port...][/root] (opening it creates the root if missing, as\n"
            "every cairn client of ZooKeeper does).\n"
            "\n"
            "Without --ledger, prints one line per replicated ledger in id order: its state\n"
            "(open, in recovery, closed), ensemble size E, write quorum Qw and ack quorum Qa,\n"
            "its last entry once closed, its number of fragments and its current ensemble (the\n"
            "nodes of its last fragment). With --ledger, prints that ledger's whole record:\n"
            "each fragment's entries and the nodes that hold them. A fragment runs from its\n"
            "first entry to the entry before the next fragment's; the last one of a ledger that\n"
            "is not closed is open-ended.\n"
            "\n"
            "A record that does not decode (damaged bytes, or intact but impossible: fragments\n"
            "out of order, a repeated node, a record stored under another ledger's key) is\n"
            "shown as DAMAGED with the reason, and nothing in it is shown or trusted.\n"
            "\n"
            "Exit status: 0 every record shown is sound, 1 a record is damaged, 2 usage error,\n"
            "no such ledger, or the metadata store could not be reached or read.\n",
        .flags = {{"metadata", "ADDRESS", true}, {"ledger", "ID", false}, {"json", "", false}},
        .examples = {"cairn replicated-ledgers --metadata 127.0.0.1:7010",
                     "cairn replicated-ledgers --metadata zk://zk1:2181,zk2:2181/cairn "
                     "--ledger 42 --json"},
        .run = RunReplicatedLedgers,
    },
    {
        .name = "cluster status",
        .summary = "Show the cluster: store nodes and their ledgers, proxies, re-replication",
        .usage = "cairn cluster status --metadata zk://HOST:PORT[,...][/ROOT] [--json]",
        .details =
            "Reads the cluster's records in its ZooKeeper ensemble and changes nothing: the\n"
            "store nodes registered (address, rack, free space, and how many replicated ledgers\n"
            "have a fragment on each), the nodes that ledgers name but that are not registered\n"
            "(down, or gone for good), the proxies, the auditor of auto re-replication, and the\n"
            "ledgers marked under-replicated: the nodes each lost, how long ago it was marked,\n"
            "and the worker copying it with the bytes copied so far and their rate.\n"
            "\n"
            "A ledger is marked once a node it names has been unregistered for the store nodes'\n"
            "--autorecovery-delay-ms, or when the periodic check finds a fragment missing on a\n"
            "node; its mark goes once its copies were made and verified (docs/replication.md).\n"
            "How many bytes are left is not known ahead: records do not hold ledger sizes.\n"
            "\n"
            "Exit status: 0 every ledger fully replicated and every node they name registered,\n"
            "1 under-replicated ledgers, unregistered nodes or damaged records, 2 usage error or\n"
            "the metadata store could not be reached or read.\n",
        .flags = {{"metadata", "ADDRESS", true}, {"json", "", false}},
        .examples = {"cairn cluster status --metadata zk://127.0.0.1:2181/cairn"},
        .run = RunClusterStatus,
    },

    {
        .name = "produce",
        .summary = "Send lines of stdin (or a file) to a topic, one message per line",
        .usage = "cairn produce TOPIC [--proxy HOST:PORT] [--file F] [--key K | --key-separator SEP]",
        .details =
            "Reads lines from standard input, or from --file, and sends each as one message\n"
            "(without its newline). --key gives every message the same key; --key-separator\n"
            "splits each line into a key and a value. Messages with a key go to the partition\n"
            "of the key's hash, so one key keeps its order; messages without one are dealt to\n"
            "the partitions in turn, a batch at a time. Waits until every message is\n"
            "acknowledged (stored by the proxy's store) and prints how many were.\n"
            "\n"
            "Exit status: 0 every message acknowledged, 2 otherwise (the first error is\n"
            "printed).\n",
        .flags = {{"proxy", "HOST:PORT", false},
                  {"reconnect_timeout_ms", "MS", false},
                  {"heartbeat_interval_ms", "MS", false},
                  {"heartbeat_timeout_ms", "MS", false},
                  {"file", "F", false},
                  {"key", "K", false},
                  {"key_separator", "SEP", false}},
        .examples = {"printf 'a\\nb\\n' | cairn produce orders",
                     "cairn produce orders --file orders.txt --key-separator ="},
        .run = RunProduce,
        .args = {"TOPIC"},
    },
    {
        .name = "consume",
        .summary = "Receive messages of a topic as a subscription, print and acknowledge them",
        .usage = "cairn consume TOPIC --subscription S [--type exclusive|failover|shared]\n"
                 "       [--start earliest|latest|OFFSET|time:T] [--count N] [--follow] [--json]",
        .details =
            "Joins the subscription (created at --start if new) and prints each message's value\n"
            "on a line of its own, or with --json one JSON object per line (partition, offset,\n"
            "key, value, timestamp, redelivered). Every message printed is acknowledged; the\n"
            "acknowledgements are persisted before the command exits, so the next consumer of\n"
            "the subscription continues after them. Stops after --count messages; without\n"
            "--follow also when no message arrived for --wait-ms.\n"
            "\n"
            "Exit status: 0, or 2 if the command could not run.\n",
        .flags = {{"proxy", "HOST:PORT", false},
                  {"reconnect_timeout_ms", "MS", false},
                  {"heartbeat_interval_ms", "MS", false},
                  {"heartbeat_timeout_ms", "MS", false},
                  {"subscription", "S", true},
                  {"type", "TYPE", false},
                  {"start", "POS", false},
                  {"count", "N", false},
                  {"follow", "", false},
                  {"wait_ms", "MS", false},
                  {"json", "", false}},
        .examples = {"cairn consume orders --subscription billing --count 10",
                     "cairn consume orders --subscription audit --type shared --follow --json",
                     "cairn consume orders --subscription replay --start time:-2h"},
        .run = RunConsume,
        .args = {"TOPIC"},
    },
    {
        .name = "topics create",
        .summary = "Create a topic",
        .usage = "cairn topics create TOPIC [--partitions N] [--proxy HOST:PORT]\n"
                 "       [--retention-age AGE] [--retention-bytes SIZE]\n"
                 "       [--delete-acknowledged] [--keep-unacknowledged]\n"
                 "       [--ensemble E] [--write-quorum QW] [--ack-quorum QA]",
        .details = "Creates the topic with N partitions (one stream each). Names are 1 to 180\n"
                   "bytes of [A-Za-z0-9._-].\n"
                   "\n"
                   "Without retention flags, messages are kept until the topic is deleted.\n"
                   "Retention deletes a partition's oldest ledgers whole, never the one being\n"
                   "written, each time a ledger is closed; 'cairn topics retention' changes it\n"
                   "later.\n"
                   "\n"
                   "On a proxy that replicates its ledgers (cairnd proxy --stores), --ensemble,\n"
                   "--write-quorum and --ack-quorum set how the topic's ledgers are replicated;\n"
                   "each one not given is the proxy's (its --ensemble, ...). The result must have\n"
                   "E = Qw >= Qa >= 1 (E at most 16), and is kept with the topic for good: later\n"
                   "changes of the proxy's defaults do not change it. A topic given none follows\n"
                   "the proxy's defaults. A proxy that does not replicate refuses them.\n"
                   "\n"
                   "Exit status: 0 created, 2 otherwise (e.g. it exists already, or a bad\n"
                   "replication setting).\n",
        .flags = {{"proxy", "HOST:PORT", false},
                  {"partitions", "N", false},
                  {"retention_age", "AGE", false},
                  {"retention_bytes", "SIZE", false},
                  {"delete_acknowledged", "", false},
                  {"keep_unacknowledged", "", false},
                  {"ensemble", "E", false},
                  {"write_quorum", "QW", false},
                  {"ack_quorum", "QA", false}},
        .examples = {"cairn topics create orders --partitions 4",
                     "cairn topics create clicks --partitions 8 --retention-age 7d "
                     "--retention-bytes 50GiB",
                     "cairn topics create payments --ensemble 5 --write-quorum 5 --ack-quorum 3"},
        .run = RunTopicsCreate,
        .args = {"TOPIC"},
    },
    {
        .name = "topics list",
        .summary = "List the topics, their partitions and replication",
        .usage = "cairn topics list [--proxy HOST:PORT] [--json]",
        .details = "Per topic: its partitions and how its new ledgers are replicated (E/Qw/Qa:\n"
                   "the topic's own settings, or the proxy's, marked '(default)'; '-' if the\n"
                   "proxy does not replicate).\n"
                   "\n"
                   "Exit status: 0, or 2 if the proxy could not be asked.\n",
        .flags = {{"proxy", "HOST:PORT", false}, {"json", "", false}},
        .examples = {"cairn topics list --json"},
        .run = RunTopicsList,
    },
    {
        .name = "topics delete",
        .summary = "Delete a topic and its messages",
        .usage = "cairn topics delete TOPIC [--proxy HOST:PORT]",
        .details = "Deletes the topic, its streams and subscriptions. Refused while producers or\n"
                   "consumers have it open.\n"
                   "\n"
                   "Exit status: 0 deleted, 2 otherwise.\n",
        .flags = {{"proxy", "HOST:PORT", false}},
        .examples = {"cairn topics delete orders"},
        .run = RunTopicsDelete,
        .args = {"TOPIC"},
    },
    {
        .name = "topics stats",
        .summary = "Show a topic's partitions, subscriptions, backlog and rates",
        .usage = "cairn topics stats TOPIC [--proxy HOST:PORT] [--json]",
        .details = "Per partition: the offsets (first, end, durable end), ledgers and bytes. Per\n"
                   "subscription: its type, consumers, backlog (messages not acknowledged) and\n"
                   "messages delivered and not acknowledged. The rates are the proxy's, over the\n"
                   "last few seconds. Then the topic's retention (see 'cairn topics retention')\n"
                   "and how its new ledgers are replicated (its own settings, given to 'cairn\n"
                   "topics create', or the proxy's defaults).\n"
                   "\n"
                   "Exit status: 0, or 2 if the topic does not exist or the proxy could not be\n"
                   "asked.\n",
        .flags = {{"proxy", "HOST:PORT", false}, {"json", "", false}},
        .examples = {"cairn topics stats orders", "cairn topics stats orders --json"},
        .run = RunTopicsStats,
        .args = {"TOPIC"},
    },
    {
        .name = "topics retention",
        .summary = "Show or change how long a topic keeps its messages",
        .usage = "cairn topics retention TOPIC [--retention-age AGE] [--retention-bytes SIZE]\n"
                 "       [--delete-acknowledged[=false]] [--keep-unacknowledged[=false]]\n"
                 "       [--proxy HOST:PORT] [--json]",
        .details = "Without retention flags, shows the topic's retention. With some, changes\n"
                   "what they name and keeps the rest (--retention-age 0 and --retention-bytes\n"
                   "0 remove a limit; --no-delete-acknowledged or --delete-acknowledged=false\n"
                   "turn a rule off), applies the result to every partition at once (deleting\n"
                   "what it no longer keeps) and shows it.\n"
                   "\n"
                   "The limits are per partition. Retention deletes a partition's oldest\n"
                   "ledgers whole, never the one being written, so a partition keeps up to a\n"
                   "ledger (256 MiB by default) more than its limits.\n"
                   "\n"
                   "Exit status: 0, or 2 if the topic does not exist, a value is bad or the\n"
                   "proxy could not be asked.\n",
        .flags = {{"proxy", "HOST:PORT", false},
                  {"retention_age", "AGE", false},
                  {"retention_bytes", "SIZE", false},
                  {"delete_acknowledged", "", false},
                  {"keep_unacknowledged", "", false},
                  {"json", "", false}},
        .examples = {"cairn topics retention orders",
                     "cairn topics retention orders --retention-age 3d",
                     "cairn topics retention orders --retention-bytes 0 --delete-acknowledged"},
        .run = RunTopicsRetention,
        .args = {"TOPIC"},
    },
    {
        .name = "compact",
        .summary = "Run one key-compaction pass on every partition of a topic",
        .usage = "cairn compact TOPIC [--proxy HOST:PORT] [--json]",
        .details = "Keeps the latest message of each key up to the compaction horizon and prints\n"
                   "what each partition's pass did.\n"
                   "\n"
                   "Exit status: 0, or 2 if the pass could not run.\n",
        .flags = {{"proxy", "HOST:PORT", false}, {"json", "", false}},
        .examples = {"cairn compact prices"},
        .run = RunCompact,
        .args = {"TOPIC"},
    },
    {
        .name = "admin unload",
        .summary = "Hand a topic's bundle to another proxy of a cluster",
        .usage = "cairn admin unload TOPIC|BUNDLE [--to HOST:PORT] [--proxy HOST:PORT,...]",
        .details =
            "In a cluster of proxies (cairnd proxy --metadata zk://..., docs/cluster.md), each\n"
            "topic is served by the proxy that owns its bundle. This asks the owner of TOPIC's\n"
            "bundle (or of BUNDLE, named as '00000000-0fffffff') to give it up: it stops taking\n"
            "sends for the bundle's topics, closes their ledgers, releases the bundle and tells\n"
            "their producers and consumers to go to --to (without --to: whichever proxy is\n"
            "asked first). They follow without an error. Prints the bundle's name.\n"
            "\n"
            "Exit status: 0 unloaded; 2 otherwise (a bundle without an owner included).\n",
        .flags = {{"proxy", "HOST:PORT", false}, {"to", "HOST:PORT", false}},
        .examples = {"cairn admin unload orders --to 127.0.0.1:7121 "
                     "--proxy 127.0.0.1:7120,127.0.0.1:7121"},
        .run = RunAdminUnload,
        .args = {"TARGET"},
    },
    {
        .name = "token create",
        .summary = "Make a signed token for a role, for daemons that require authentication",
        .usage = "cairn token create --secret-file FILE --role ROLE [--ttl 24h]",
        .details =
            "Prints a token (a JSON Web Token signed with HMAC-SHA256) that names ROLE and\n"
            "expires after --ttl (90s, 30m, 24h, 7d), signed with the secret in FILE: the file\n"
            "the proxies were started with (cairnd --auth-token-secret-file). Clients present\n"
            "it with --token or $CAIRN_TOKEN; it is worth what the role was granted (cairn\n"
            "grant), and everything for an administrator role (cairnd --auth-admin-roles).\n"
            "A store node started with the flag accepts only tokens of its cluster roles\n"
            "(cairnd --auth-cluster-roles: proxy, autorecovery, admin); proxies and store nodes\n"
            "present theirs from a file (cairnd --store-token-file), and must be restarted with\n"
            "a new one before it expires.\n"
            "Keep the secret file readable by its owner only: whoever reads it can make tokens.\n"
            "\n"
            "Exit status: 0, or 2 (unreadable or short secret, bad role or --ttl).\n",
        .flags = {{"secret_file", "FILE", true}, {"role", "ROLE", true}, {"ttl", "TTL", false}},
        .examples = {"export CAIRN_TOKEN=$(cairn token create --secret-file /etc/cairn/secret "
                     "--role billing --ttl 7d)"},
        .run = RunTokenCreate,
    },
    {
        .name = "grant",
        .summary = "Give a role permissions on topics",
        .usage = "cairn grant ROLE RESOURCE PERMISSIONS [--proxy HOST:PORT] [--token T]",
        .details =
            "Adds PERMISSIONS (produce, consume, administer, comma-separated, or all) to what\n"
            "ROLE may do to RESOURCE: * (every topic), a prefix ending in .* (tenant.* or\n"
            "tenant.namespace.*, by the convention of dotted topic names) or a topic name.\n"
            "produce: open producers. consume: subscribe, unsubscribe, read compacted.\n"
            "administer: create, delete, compact, set retention. Any of them: stats, lookup.\n"
            "Grants live in the metadata store, for every proxy, and apply from the next call\n"
            "that checks them (producers and consumers already open keep going). On a proxy\n"
            "with authentication only administrator roles may change them; on one without,\n"
            "anyone who reaches it may (grants can be set up before authentication is on).\n"
            "\n"
            "Exit status: 0, or 2.\n",
        .flags = {{"proxy", "HOST:PORT", false}},
        .examples = {"cairn grant billing 'billing.*' produce,consume --token $ADMIN_TOKEN"},
        .run = RunGrant,
        .args = {"ROLE", "RESOURCE", "PERMISSIONS"},
    },
    {
        .name = "revoke",
        .summary = "Take permissions on topics away from a role",
        .usage = "cairn revoke ROLE RESOURCE PERMISSIONS [--proxy HOST:PORT] [--token T]",
        .details =
            "Takes PERMISSIONS away from ROLE's grant on exactly RESOURCE (as cairn grant\n"
            "names them); a grant left with none is deleted. Wider or narrower grants of the\n"
            "role are kept: list them with cairn grants --role ROLE.\n"
            "\n"
            "Exit status: 0, or 2 (the role has no grant on RESOURCE, among others).\n",
        .flags = {{"proxy", "HOST:PORT", false}},
        .examples = {"cairn revoke billing 'billing.*' produce"},
        .run = RunRevoke,
        .args = {"ROLE", "RESOURCE", "PERMISSIONS"},
    },
    {
        .name = "grants",
        .summary = "List the roles' grants",
        .usage = "cairn grants [--role ROLE] [--proxy HOST:PORT] [--token T] [--json]",
        .details = "Prints every grant, or ROLE's, as role, resource and permissions.\n"
                   "\n"
                   "Exit status: 0, or 2.\n",
        .flags = {{"proxy", "HOST:PORT", false}, {"role", "ROLE", false}, {"json", "", false}},
        .examples = {"cairn grants --role billing"},
        .run = RunGrants,
    },
    {
        .name = "perf produce",
        .summary = "Measure producing: messages/s, MB/s, publish latency",
        .usage = "cairn perf produce TOPIC [--rate R] [--size BYTES] [--messages N | --duration S]\n"
                 "       [--linger-us US] [--batch-bytes B] [--batch-messages N]\n"
                 "       [--max-pending-bytes B] [--callbacks] [--json]",
        .details =
            "Sends messages of --size random bytes (no key; at most 4194240, the largest\n"
            "message) as fast as they are taken, or at --rate per second, and measures the\n"
            "publish latency of every 8th: from the send to its acknowledgement. Only those\n"
            "have a callback (with --callbacks, every message has one, as an application that\n"
            "wants each message's id would): the others are sent without, and a flush at the\n"
            "end answers for them. On a terminal a progress line shows every second on\n"
            "standard error. Ends with one result line in cairn-bench's format (key=value\n"
            "fields; a JSON object with --json): messages/s and MB/s (10^6 bytes)\n"
            "acknowledged, latency p50/p99/p999/max in microseconds, and this process's CPU\n"
            "time per acknowledged message (cpu_ns_per_msg, all threads, user and system) and\n"
            "in cores (cpu_cores).\n"
            "\n"
            "With --embedded DIR there is no proxy: the same messages, batched the same way,\n"
            "are appended through the library in this process to --partitions streams of a store\n"
            "in DIR (--durability), which is the baseline to compare the proxy with. Its CPU\n"
            "figures then include the store's; through a proxy they are the client's alone.\n"
            "\n"
            "It stops at the first send that fails (the proxy gone for longer than\n"
            "--reconnect-timeout-ms, say), and reports what was acknowledged until then\n"
            "(without --callbacks, estimated from the answers of the messages it times, one\n"
            "in 8, and marked acknowledged=estimated; failed= counts those).\n"
            "\n"
            "Exit status: 0, or 2 if a send failed or the command could not run.\n",
        .flags = {{"proxy", "HOST:PORT", false},
                  {"reconnect_timeout_ms", "MS", false},
                  {"heartbeat_interval_ms", "MS", false},
                  {"heartbeat_timeout_ms", "MS", false},
                  {"rate", "R", false},
                  {"size", "BYTES", false},
                  {"messages", "N", false},
                  {"duration", "S", false},
                  {"linger_us", "US", false},
                  {"batch_bytes", "B", false},
                  {"batch_messages", "N", false},
                  {"max_pending_bytes", "B", false},
                  {"callbacks", "", false},
                  {"embedded", "DIR", false},
                  {"partitions", "N", false},
                  {"durability", "sync|async", false},
                  {"json", "", false}},
        .examples = {"cairn perf produce bench --messages 1000000 --size 100",
                     "cairn perf produce bench --messages 1000000 --embedded /tmp/e --partitions 4",
                     "cairn perf produce bench --rate 10000 --duration 30"},
        .run = RunPerfProduce,
        .args = {"TOPIC"},
    },
    {
        .name = "perf consume",
        .summary = "Measure consuming: messages/s, MB/s, end-to-end latency",
        .usage = "cairn perf consume TOPIC --subscription S [--type T] [--start POS]\n"
                 "       [--messages N | --duration S] [--json]",
        .details =
            "Receives and acknowledges messages as fast as they come and measures the\n"
            "end-to-end latency of each: from its timestamp (set when it was sent) to its\n"
            "receipt, which is meaningful when the producer's clock is this machine's. Stops\n"
            "after --messages, after --duration, or when no message arrived for --wait-ms.\n"
            "Ends with one result line in cairn-bench's format, with this process's CPU time\n"
            "per message received (cpu_ns_per_msg) and in cores (cpu_cores).\n"
            "\n"
            "Exit status: 0, or 2 if the command could not run.\n",
        .flags = {{"proxy", "HOST:PORT", false},
                  {"reconnect_timeout_ms", "MS", false},
                  {"heartbeat_interval_ms", "MS", false},
                  {"heartbeat_timeout_ms", "MS", false},
                  {"subscription", "S", true},
                  {"type", "TYPE", false},
                  {"start", "POS", false},
                  {"messages", "N", false},
                  {"duration", "S", false},
                  {"wait_ms", "MS", false},
                  {"json", "", false}},
        .examples = {"cairn perf consume bench --subscription perf --messages 1000000"},
        .run = RunPerfConsume,
        .args = {"TOPIC"},
    },
};

#undef CAIRN_CLI_OPEN_NOTE

// Every command that reaches a proxy or a store node takes the TLS flags and --token too.
std::vector<Command> WithTlsFlags() {
  std::vector<Command> commands(std::begin(kCommandsAsWritten), std::end(kCommandsAsWritten));
  for (Command& command : commands) {
    const bool remote = std::any_of(command.flags.begin(), command.flags.end(),
                                    [](const FlagUse& use) {
                                      return std::string_view(use.name) == "proxy" ||
                                             std::string_view(use.name) == "metadata";
                                    });
    if (!remote) continue;
    command.flags.push_back({"tls_ca", "FILE", false});
    command.flags.push_back({"tls_cert", "FILE", false});
    command.flags.push_back({"tls_key", "FILE", false});
    command.flags.push_back({"tls_server_name", "NAME", false});
    command.flags.push_back({"token", "TOKEN", false});
  }
  return commands;
}

}  // namespace

std::span<const Command> Commands() {
  static const std::vector<Command> commands = WithTlsFlags();
  return commands;
}

std::string Bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%d B", bytes)
                   : absl::StrFormat("%.1f %s", value, units[unit]);
}

}  // namespace cairn::cli
