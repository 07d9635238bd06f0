// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Node records and their registration (node_registry.h).
#include "net/cluster/node_registry.h"

#include <charconv>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "net/cluster/text_record.h"
#include "src/util/strings.h"

namespace cairn::net {

using internal::MutexLock;
using internal::Sv;
using internal::UniqueLock;

std::string EncodeNodeRecord(const NodeRecord& record) {
  std::string out = absl::StrCat("address=", record.address, "\nfree_bytes=", record.free_bytes,
                                 "\nrack=", record.rack, "\n");
  if (record.load != NodeLoad{}) {
    absl::StrAppend(&out, "topics=", record.load.topics, "\nconnections=", record.load.connections,
                    "\nmessages_per_s=", record.load.messages_per_s,
                    "\nbytes_per_s=", record.load.bytes_per_s, "\n");
  }
  return out;
}

absl::StatusOr<NodeRecord> DecodeNodeRecord(std::string_view value) {
  auto bad = [&](std::string_view why) {
    return absl::DataLossError(absl::StrCat("node record \"", absl::CHexEscape(Sv(value)),
                                            "\": ", Sv(why)));
  };
  absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> fields =
      ParseTextRecord("node record", value);
  if (!fields.ok()) return fields.status();
  NodeRecord record;
  auto number = [](std::string_view field, uint64_t& out) {
    const auto [ptr, error] = std::from_chars(field.data(), field.data() + field.size(), out);
    return error == std::errc() && ptr == field.data() + field.size() && !field.empty();
  };
  const std::pair<std::string_view, uint64_t*> numbers[] = {
      {"free_bytes", &record.free_bytes},
      {"topics", &record.load.topics},
      {"connections", &record.load.connections},
      {"messages_per_s", &record.load.messages_per_s},
      {"bytes_per_s", &record.load.bytes_per_s}};
  for (const auto& [name, field] : *fields) {
    if (name == "address") {
      record.address = std::string(field);
    } else if (name == "rack") {
      record.rack = std::string(field);
    } else {
      for (const auto& [number_name, out] : numbers) {
        if (name == number_name && !number(field, *out)) {
          return bad(absl::StrCat(Sv(number_name), " is not a number"));
        }
      }
    }  // Other fields: from a later version, ignored.
  }
  if (record.address.empty()) return bad("no address");
  return record;
}

namespace {

absl::StatusOr<std::vector<NodeRecord>> ListNodes(MetadataStore& metadata, std::string_view prefix,
                                                 const LogFunction& log) {
  absl::StatusOr<std::vector<std::string>> keys = metadata.List(prefix);
  if (!keys.ok()) return keys.status();
  std::vector<NodeRecord> nodes;
  for (const std::string& key : *keys) {
    absl::StatusOr<VersionedValue> value = metadata.Get(key);
    if (absl::IsNotFound(value.status())) continue;  // Gone since the listing.
    if (!value.ok()) return value.status();
    absl::StatusOr<NodeRecord> record = DecodeNodeRecord(value->value);
    if (!record.ok()) {
      if (log) log(LogLevel::kWarning, record.status().ToString());
      continue;
    }
    nodes.push_back(*std::move(record));
  }
  return nodes;
}

}  // namespace

absl::StatusOr<std::vector<NodeRecord>> ListStoreNodes(MetadataStore& metadata,
                                                      const LogFunction& log) {
  return ListNodes(metadata, kStoreNodeKeyPrefix, log);
}

absl::StatusOr<std::vector<NodeRecord>> ListProxies(MetadataStore& metadata,
                                                   const LogFunction& log) {
  return ListNodes(metadata, kProxyKeyPrefix, log);
}

NodeRegistration::NodeRegistration(MetadataStore* metadata, std::string key,
                                   std::function<NodeRecord()> current,
                                   std::chrono::milliseconds session_timeout,
                                   std::chrono::milliseconds refresh, LogFunction log)
    : metadata_(metadata),
      key_(std::move(key)),
      current_(std::move(current)),
      session_timeout_(session_timeout),
      refresh_(refresh),
      log_(std::move(log)),
      thread_([this] { Run(); }) {}

NodeRegistration::~NodeRegistration() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void NodeRegistration::Run() {
  auto say = [&](LogLevel level, const std::string& message) {
    if (log_) log_(level, message);
  };
  std::unique_ptr<MetadataSession> session;  // This thread's only.
  uint64_t version = kNewKey;
  std::string written;
  UniqueLock lock(mu_);
  while (!stop_) {
    const bool lost = lost_;
    lost_ = false;
    lock.unlock();
    if (lost) {
      // Not under mu_: ending the session waits for its thread, which may be in on_lost.
      session.reset();
      version = kNewKey;
    }
    auto delay = refresh_;
    if (session == nullptr) {
      MetadataSessionOptions options;
      options.timeout = session_timeout_;
      options.on_lost = [this](const absl::Status& why) {
        if (log_) {
          log_(LogLevel::kError, absl::StrCat("registration ", key_, ": ", why.ToString(),
                                              "; registering again with a new session"));
        }
        {
          MutexLock lost(mu_);
          lost_ = true;
        }
        wake_.notify_all();
      };
      absl::StatusOr<std::unique_ptr<MetadataSession>> opened = metadata_->OpenSession(options);
      if (opened.ok()) {
        session = *std::move(opened);
      } else {
        say(LogLevel::kWarning, absl::StrCat("registration ", key_, ": ", opened.status().ToString()));
        delay = std::chrono::milliseconds(500);
      }
    }
    if (session != nullptr) {
      const std::string value = EncodeNodeRecord(current_());
      if (version == kNewKey || value != written) {
        absl::StatusOr<uint64_t> put = session->PutEphemeral(key_, value, version);
        if (put.ok()) {
          if (version == kNewKey) say(LogLevel::kInfo, absl::StrCat("registered as ", key_));
          version = *put;
          written = value;
        } else {
          // kAborted on a first write: the record of an earlier run, whose session has not
          // expired yet. It will.
          say(LogLevel::kWarning, absl::StrCat("registration ", key_, ": ", put.status().ToString(),
                                               version == kNewKey ? "; trying again" : ""));
          delay = std::chrono::milliseconds(500);
          if (version != kNewKey && absl::IsAborted(put.status())) {
            // Someone else changed or deleted the record: make it ours again from scratch.
            session.reset();
            version = kNewKey;
          }
        }
      }
    }
    lock.lock();
    wake_.wait_for(lock.native(), delay, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || lost_;
    });
  }
  lock.unlock();
  session.reset();  // Ends the session: the record goes at once.
}


}  // namespace cairn::net
