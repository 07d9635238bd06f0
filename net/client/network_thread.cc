// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/network_thread.h"

#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cairn/net/limits.h"
#include "kj/debug.h"

namespace cairn::net {

absl::StatusOr<std::unique_ptr<NetworkThread>> NetworkThread::Start(std::string what,
                                                                     LogFunction log) {
  auto thread = std::unique_ptr<NetworkThread>(new NetworkThread(std::move(what), std::move(log)));
  std::promise<void> ready;
  std::future<void> started = ready.get_future();
  thread->thread_ = std::thread([&self = *thread, &ready] { self.Main(ready); });
  started.get();
  if (thread->executor_.get() == nullptr) {
    thread->thread_.join();
    return absl::InternalError(absl::StrCat(thread->what_, ": the network thread did not start"));
  }
  return thread;
}

NetworkThread::~NetworkThread() {
  if (!stopped_) Stop();
}

void NetworkThread::Stop(const std::function<void()>& release) {
  stopped_ = true;
  if (executor_.get() != nullptr) {
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
      executor_->executeSync([&] {
        // Continuations first (they may hold answers of the connection), then what the owner
        // keeps, then the loop.
        tasks_ = nullptr;
        if (release) release();
        stop_->fulfill();
      });
    });
    (void)failure;  // the loop has stopped already: nothing left to stop
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status NetworkThread::CalledFromCallback() const {
  return absl::FailedPreconditionError(absl::StrCat(
      "a blocking call of ", what_, " from its own network thread (a callback) would deadlock"));
}

void NetworkThread::Post(std::function<void()> func) {
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> ring;
  {
    std::lock_guard lock(posted_mu_);
    if (loop_done_) return;
    posted_.push_back(std::move(func));
    ring = kj::mv(doorbell_);
  }
  if (ring.get() != nullptr) ring->fulfill();
}

void NetworkThread::PostAndWait(std::function<void()> func) {
  std::promise<void> ran;
  std::future<void> done = ran.get_future();
  {
    std::lock_guard lock(posted_mu_);
    if (loop_done_) return;
  }
  Post([&] {
    func();
    ran.set_value();
  });
  done.wait();
}

kj::Promise<void> NetworkThread::RunPosted() {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
  std::vector<std::function<void()>> run;
  {
    std::lock_guard lock(posted_mu_);
    run.swap(posted_);
    if (run.empty()) doorbell_ = kj::mv(paf.fulfiller);
  }
  if (!run.empty()) {
    for (std::function<void()>& func : run) func();
    // More may have been posted meanwhile; look again after other events had their turn.
    return kj::evalLater([this] { return RunPosted(); });
  }
  return paf.promise.then([this] { return RunPosted(); });
}

void NetworkThread::taskFailed(kj::Exception&& exception) {
  log_(LogLevel::kWarning, absl::StrCat(what_, ": ", ExceptionToStatus(exception).ToString()));
}

void NetworkThread::Main(std::promise<void>& ready) {
  bool signalled = false;
  kj::Maybe<kj::Exception> failed = kj::runCatchingExceptions([&] {
    loop_thread_id_ = std::this_thread::get_id();
    kj::AsyncIoContext io = kj::setupAsyncIo();
    auto stop = kj::newPromiseAndFulfiller<void>();
    io_ = io.provider.get();
    tasks_ = kj::heap<kj::TaskSet>(*this);
    stop_ = kj::mv(stop.fulfiller);
    kj::Promise<void> posted = RunPosted().eagerlyEvaluate(nullptr);
    executor_ = kj::getCurrentThreadExecutor().addRef();
    signalled = true;
    ready.set_value();

    stop.promise.wait(io.waitScope);
    {
      std::lock_guard lock(posted_mu_);
      loop_done_ = true;
      posted_.clear();
      doorbell_ = nullptr;
    }
    posted = nullptr;
    tasks_ = nullptr;
    io_ = nullptr;
  });
  KJ_IF_MAYBE (exception, failed) {
    log_(LogLevel::kError,
         absl::StrCat(what_, ": network thread: ", ExceptionToStatus(*exception).ToString()));
  }
  if (!signalled) ready.set_value();
}

RpcConnection::RpcConnection(kj::Own<kj::AsyncIoStream> stream) : stream_(kj::mv(stream)) {
  capnp::ReaderOptions limits;
  limits.traversalLimitInWords = kMaxMessageBytes / sizeof(capnp::word);
  network_ =
      kj::heap<capnp::TwoPartyVatNetwork>(*stream_, capnp::rpc::twoparty::Side::CLIENT, limits);
  rpc_system_ = kj::heap(capnp::makeRpcClient(*network_));
}

RpcConnection::~RpcConnection() {
  rpc_system_ = nullptr;
  network_ = nullptr;
  stream_ = nullptr;
}

capnp::Capability::Client RpcConnection::BootstrapCap() {
  capnp::MallocMessageBuilder message(8);
  auto server = message.initRoot<capnp::rpc::twoparty::VatId>();
  server.setSide(capnp::rpc::twoparty::Side::SERVER);
  return rpc_system_->bootstrap(server);
}

kj::Promise<kj::Own<RpcConnection>> RpcConnection::Connect(kj::AsyncIoProvider& io,
                                                           const std::string& address,
                                                           std::chrono::milliseconds timeout) {
  return io.getTimer()
      .timeoutAfter(timeout.count() * kj::MILLISECONDS,
                    io.getNetwork()
                        .parseAddress(kj::StringPtr(address.c_str()))
                        .then([](kj::Own<kj::NetworkAddress> parsed) {
                          return parsed->connect().attach(kj::mv(parsed));
                        }))
      .then(
          [](kj::Own<kj::AsyncIoStream> stream) {
            return kj::heap<RpcConnection>(kj::mv(stream));
          },
          [address](kj::Exception&& exception) -> kj::Own<RpcConnection> {
            kj::throwFatalException(
                StatusToException(ConnectError(address, ExceptionToStatus(exception))));
          });
}

absl::Status ConnectError(const std::string& address, const absl::Status& cause) {
  return absl::UnavailableError(absl::StrCat("cannot connect to ", address, ": ", cause.message()));
}

}  // namespace cairn::net
