// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/proxy_access.h"

#include <string>

#include "net/schema/proxy.capnp.h"

namespace cairn::net::internal {
namespace {

using rpc::Proxy;

template <typename Params>
std::string TopicOf(capnp::AnyPointer::Reader params) {
  auto p = params.getAs<Params>();
  if constexpr (requires { p.getName(); }) {
    return std::string(p.getName().cStr(), p.getName().size());
  } else {
    return std::string(p.getTopic().cStr(), p.getTopic().size());
  }
}

template <typename Params>
Access OnTopic(capnp::AnyPointer::Reader params, uint32_t permissions) {
  return Access::OnTopic(permissions, TopicOf<Params>(params));
}

}  // namespace

Access ProxyCallAccess(uint16_t method_id, capnp::AnyPointer::Reader params) {
  constexpr uint32_t kAny = kAllPermissions;
  switch (method_id) {
    case 0: return OnTopic<Proxy::CreateTopicParams>(params, kAdminister);
    case 1: return OnTopic<Proxy::DeleteTopicParams>(params, kAdminister);
    case 2: return Access::AnyRole();  // listTopics: names only
    case 3: return OnTopic<Proxy::TopicStatsParams>(params, kAny);
    case 4: return OnTopic<Proxy::CompactParams>(params, kAdminister);
    case 5: return OnTopic<Proxy::SetRetentionParams>(params, kAdminister);
    case 6: return OnTopic<Proxy::OpenProducerParams>(params, kProduce);
    case 7: return OnTopic<Proxy::SubscribeParams>(params, kConsume);
    case 8: return OnTopic<Proxy::UnsubscribeParams>(params, kConsume);
    case 9: return OnTopic<Proxy::ReadCompactedParams>(params, kConsume);
    case 10: return Access::Anyone();  // ping
    case 11: return OnTopic<Proxy::LookupParams>(params, kAny);
    case 12: return Access::AdminRole();  // unload: may name a bundle
    case 13: return Access::Anyone();  // authenticate
    default: return Access::AdminRole();  // grants, and what comes later
  }
}

}  // namespace cairn::net::internal
