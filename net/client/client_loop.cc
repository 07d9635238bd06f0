// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/client_loop.h"

#include "absl/strings/str_cat.h"
#include "cairn/net/limits.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "kj/debug.h"

namespace cairn::net::internal {

absl::StatusOr<std::unique_ptr<ClientLoop>> ClientLoop::Start(const ClientLoopOptions& options) {
  auto loop = std::unique_ptr<ClientLoop>(new ClientLoop(options));
  std::promise<absl::Status> ready;
  std::future<absl::Status> started = ready.get_future();
  loop->thread_ = std::thread([&loop = *loop, &ready] { loop.Main(ready); });
  absl::Status status = started.get();
  if (!status.ok()) {
    loop->thread_.join();
    return status;
  }
  return loop;
}

ClientLoop::~ClientLoop() {
  if (executor_.get() != nullptr) {
    kj::Maybe<kj::Exception> failure =
        kj::runCatchingExceptions([&] { executor_->executeSync([this] { stop_->fulfill(); }); });
    (void)failure;  // the loop has stopped already: nothing left to stop
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status ClientLoop::CalledFromLoop() const {
  return absl::FailedPreconditionError(
      absl::StrCat("a blocking call of the ", options_.what,
                   " client from its own network thread (a callback) would deadlock"));
}

void ClientLoop::taskFailed(kj::Exception&& exception) {
  options_.log(LogLevel::kWarning, absl::StrCat(options_.what, " client of ", options_.address,
                                                ": ", ExceptionToStatus(exception).ToString()));
}

void ClientLoop::Main(std::promise<absl::Status>& ready) {
  bool signalled = false;
  auto failed = kj::runCatchingExceptions([&] {
    loop_thread_id_ = std::this_thread::get_id();
    kj::AsyncIoContext io = kj::setupAsyncIo();
    const kj::Duration timeout = options_.connect_timeout.count() * kj::MILLISECONDS;
    kj::Own<kj::AsyncIoStream> stream =
        io.provider->getTimer()
            .timeoutAfter(timeout, io.provider->getNetwork()
                                       .parseAddress(kj::StringPtr(options_.address.c_str()))
                                       .then([](kj::Own<kj::NetworkAddress> address) {
                                         return address->connect().attach(kj::mv(address));
                                       }))
            .wait(io.waitScope);
    capnp::ReaderOptions limits;
    limits.traversalLimitInWords = kMaxMessageBytes / sizeof(capnp::word);
    capnp::TwoPartyVatNetwork network(*stream, capnp::rpc::twoparty::Side::CLIENT, limits);
    auto rpc_system = capnp::makeRpcClient(network);
    capnp::MallocMessageBuilder message(8);
    auto server = message.initRoot<capnp::rpc::twoparty::VatId>();
    server.setSide(capnp::rpc::twoparty::Side::SERVER);
    rpc::StoreNode::Client node = rpc_system.bootstrap(server).castAs<rpc::StoreNode>();
    kj::TaskSet tasks(*this);
    auto stop = kj::newPromiseAndFulfiller<void>();

    node_ = &node;
    tasks_ = &tasks;
    stop_ = kj::mv(stop.fulfiller);
    executor_ = kj::getCurrentThreadExecutor().addRef();
    ready.set_value(absl::OkStatus());
    signalled = true;

    stop.promise.wait(io.waitScope);
    tasks_ = nullptr;
    node_ = nullptr;
  });
  if (!signalled) {
    KJ_IF_MAYBE (exception, failed) {
      absl::Status status = ExceptionToStatus(*exception);
      ready.set_value(absl::UnavailableError(
          absl::StrCat("cannot connect to ", options_.address, ": ", status.message())));
    }
  }
}

}  // namespace cairn::net::internal
