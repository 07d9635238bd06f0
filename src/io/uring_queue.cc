// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The io_uring engine: one ring per IoQueue, one SQE per request. A request the kernel finishes
// only partly (a short read or write) is resubmitted for the rest before it completes, so callers
// see the same all-or-error semantics as the POSIX engine.
#include <liburing.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/io/internal.h"
#include "src/util/errors.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn::internal {
namespace {

// Largest length handed to the kernel in one SQE (its length fields are 32-bit).
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;

// A ring's memory is mapped from the kernel by io_uring_queue_init and unmapped by
// io_uring_queue_exit, and the next ring, made on another thread, is often mapped at the same
// address. ThreadSanitizer does not see the unmapping and mapping as ordering anything, and took
// the new ring's first accesses for a race with the old ring's last ones (a stream roll-over's
// CreateLedger on one pool thread after another's, in a network test). Each ring touches this
// counter once it is mapped and once more before it is unmapped, with acquire-release: that
// orders an unmapped ring's accesses before those of the next ring at its address, for the
// tool. One atomic operation per ring made and per ring released.
std::atomic<uint64_t> ring_mappings{0};
void OrderRingMappings() { ring_mappings.fetch_add(1, std::memory_order_acq_rel); }

std::string_view OpName(IoOp op) {
  switch (op) {
    case IoOp::kRead:
      return "read";
    case IoOp::kWrite:
      return "write";
    case IoOp::kDataSync:
      return "fdatasync";
    case IoOp::kSync:
      return "fsync";
    case IoOp::kAllocate:
      return "fallocate";
    case IoOp::kSyncFileSystem:
      return "syncfs";
    case IoOp::kStartWriteback:
      return "sync_file_range";
  }
  return "unknown";
}

class UringQueue final : public IoQueue {
 public:
  explicit UringQueue(uint32_t depth) : depth_(depth), slots_(depth) {
    free_.reserve(depth);
    for (uint32_t i = depth; i > 0; --i) free_.push_back(i - 1);
  }

  ~UringQueue() override {
    if (initialized_) {
      // Requests still in the kernel point at caller buffers that are about to go away: wait.
      while (submitted_ > 0) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_wait_cqe(&ring_, &cqe) != 0) break;
        io_uring_cqe_seen(&ring_, cqe);
        --submitted_;
      }
      OrderRingMappings();
      io_uring_queue_exit(&ring_);
    }
  }

  absl::Status Init() {
    int rc = io_uring_queue_init(depth_, &ring_, 0);
    if (rc < 0) return ErrnoStatus(-rc, "io_uring_queue_init");
    OrderRingMappings();
    initialized_ = true;
    return absl::OkStatus();
  }

  absl::Status Enqueue(const IoRequest& request) override {
    CAIRN_RETURN_IF_ERROR(ValidateRequest(request));
    if (in_flight_ >= depth_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("I/O queue full: ", depth_, " requests in flight"));
    }
    // A sync enqueued alone has company now: it goes to the ring, first.
    if (lone_sync_.has_value()) {
      CAIRN_RETURN_IF_ERROR(EnqueueInRing(*std::exchange(lone_sync_, {})));
    }
    const auto& file = static_cast<const FdFile&>(*request.file);
    if (file.direct()) {
      // Report misaligned direct I/O in the completion, as the POSIX engine does.
      if (absl::Status aligned = ValidateDirectRequest(request); !aligned.ok()) {
        ready_.push_back(IoCompletion{request.tag, request.op, std::move(aligned), 0});
        ++in_flight_;
        return absl::OkStatus();
      }
    }
    if (request.op == IoOp::kSyncFileSystem) {
      // io_uring has no syncfs: the call runs on this thread when the submission is made.
      deferred_.push_back(request);
      ++in_flight_;
      return absl::OkStatus();
    }
    // A sync that is all the queue has to do runs on this thread at Submit(): the ring would
    // hand it to one of the kernel's io_uring workers (a sync never completes inline) and wake
    // this thread from there, two more context switches for the same wait. A group commit's
    // round ends with one such sync; several syncs, or a sync beside other requests, still go
    // to the ring side by side.
    if ((request.op == IoOp::kSync || request.op == IoOp::kDataSync) && in_flight_ == 0) {
      lone_sync_ = request;
      ++in_flight_;
      return absl::OkStatus();
    }
    CAIRN_RETURN_IF_ERROR(EnqueueInRing(request));
    ++in_flight_;
    return absl::OkStatus();
  }

  absl::Status Submit() override {
    if (lone_sync_.has_value()) {
      // Still alone: nothing else was enqueued since, and nothing was in flight before it.
      RunHere(*std::exchange(lone_sync_, {}));
      return absl::OkStatus();
    }
    for (const IoRequest& request : deferred_) RunHere(request);
    deferred_.clear();
    if (unsubmitted_ == 0) return absl::OkStatus();
    CAIRN_RETURN_IF_ERROR(SubmitRing());
    unsubmitted_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Reap(std::span<IoCompletion> out, size_t min_completions) override {
    if (min_completions > out.size() || min_completions > in_flight_) {
      return absl::InvalidArgumentError(absl::StrCat("waiting for ", min_completions,
                                                     " completions with ", in_flight_,
                                                     " requests in flight"));
    }
    if (min_completions > ready_.size() + submitted_) {
      return absl::FailedPreconditionError("waiting for requests that were never submitted");
    }
    // Drain whatever is there, then block until enough requests have finished.
    CAIRN_RETURN_IF_ERROR(Drain(/*wait=*/false));
    while (ready_.size() < min_completions) CAIRN_RETURN_IF_ERROR(Drain(/*wait=*/true));
    size_t n = 0;
    while (n < out.size() && !ready_.empty()) {
      out[n++] = std::move(ready_.front());
      ready_.pop_front();
    }
    in_flight_ -= n;
    return n;
  }

  size_t in_flight() const override { return in_flight_; }
  uint32_t depth() const override { return depth_; }

 private:
  struct Slot {
    IoRequest request;
    uint64_t done = 0;  // Bytes transferred so far.
  };

  // Runs `request` on this thread; its completion is ready at once.
  void RunHere(const IoRequest& request) {
    IoCompletion done = ExecutePosix(static_cast<const FdFile&>(*request.file), request);
    done.tag = request.tag;
    done.op = request.op;
    ready_.push_back(std::move(done));
  }

  // Prepares `request` in the ring (counted in unsubmitted_, not in in_flight_).
  absl::Status EnqueueInRing(const IoRequest& request) {
    uint32_t index = free_.back();
    free_.pop_back();
    slots_[index] = Slot{request, 0};
    if (absl::Status prepared = Prepare(index); !prepared.ok()) {
      free_.push_back(index);
      return prepared;
    }
    ++unsubmitted_;
    return absl::OkStatus();
  }

  absl::Status Prepare(uint32_t index) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      // The submission ring is full of prepared entries: hand them over and retry.
      CAIRN_RETURN_IF_ERROR(SubmitRing());
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) return absl::InternalError("io_uring submission queue full");
    }
    const Slot& slot = slots_[index];
    const IoRequest& r = slot.request;
    const int fd = static_cast<const FdFile&>(*r.file).fd();
    const uint64_t remaining = r.length - slot.done;
    const unsigned chunk = static_cast<unsigned>(std::min(remaining, kMaxChunkBytes));
    switch (r.op) {
      case IoOp::kRead:
        io_uring_prep_read(sqe, fd, r.read_buffer + slot.done, chunk, r.offset + slot.done);
        break;
      case IoOp::kWrite:
        io_uring_prep_write(sqe, fd, r.write_data + slot.done, chunk, r.offset + slot.done);
        break;
      case IoOp::kDataSync:
        io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
        break;
      case IoOp::kSync:
        io_uring_prep_fsync(sqe, fd, 0);
        break;
      case IoOp::kAllocate:
        io_uring_prep_fallocate(sqe, fd, 0, static_cast<off_t>(r.offset),
                                static_cast<off_t>(r.length));
        break;
      case IoOp::kSyncFileSystem:  // Never prepared: run at Submit().
        io_uring_prep_nop(sqe);
        break;
      case IoOp::kStartWriteback:
        // The ring's length is 32 bits; 0 means "to the end of the file", a superset that does
        // as well for a hint.
        io_uring_prep_sync_file_range(
            sqe, fd, r.length > UINT32_MAX ? 0 : static_cast<unsigned>(r.length), r.offset,
            SYNC_FILE_RANGE_WRITE);
        break;
    }
    io_uring_sqe_set_data64(sqe, index);
    return absl::OkStatus();
  }

  absl::Status SubmitRing() {
    for (;;) {
      int rc = io_uring_submit(&ring_);
      if (rc >= 0) {
        submitted_ += static_cast<size_t>(rc);
        return absl::OkStatus();
      }
      if (rc == -EINTR || rc == -EAGAIN) continue;
      return ErrnoStatus(-rc, "io_uring_submit");
    }
  }

  // Processes completions: all that are available, and with `wait` at least one.
  absl::Status Drain(bool wait) {
    io_uring_cqe* cqe = nullptr;
    if (wait) {
      int rc;
      do {
        rc = io_uring_wait_cqe(&ring_, &cqe);
      } while (rc == -EINTR);
      if (rc < 0) return ErrnoStatus(-rc, "io_uring_wait_cqe");
    }
    bool resubmit = false;
    while (io_uring_peek_cqe(&ring_, &cqe) == 0 && cqe != nullptr) {
      const uint32_t index = static_cast<uint32_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --submitted_;
      Slot& slot = slots_[index];
      const IoRequest& r = slot.request;
      if (res == -EINTR || res == -EAGAIN) {
        CAIRN_RETURN_IF_ERROR(Prepare(index));
        resubmit = true;
        continue;
      }
      IoCompletion c;
      c.tag = r.tag;
      c.op = r.op;
      if (res < 0) {
        c.status = ErrnoStatus(-res, absl::StrCat(Sv(OpName(r.op)), " ", r.file->path()));
      } else if (r.op == IoOp::kRead || r.op == IoOp::kWrite) {
        slot.done += static_cast<uint64_t>(res);
        const bool eof = r.op == IoOp::kRead && res == 0;
        if (r.op == IoOp::kWrite && res == 0 && r.length > 0) {
          c.status = ErrnoStatus(EIO, absl::StrCat("write ", r.file->path(), " made no progress"));
        } else if (slot.done < r.length && !eof) {
          CAIRN_RETURN_IF_ERROR(Prepare(index));  // Short transfer: continue where it stopped.
          resubmit = true;
          continue;
        }
        c.bytes = slot.done;
      }
      ready_.push_back(std::move(c));
      free_.push_back(index);
    }
    if (resubmit) CAIRN_RETURN_IF_ERROR(SubmitRing());
    return absl::OkStatus();
  }

  const uint32_t depth_;
  io_uring ring_{};
  bool initialized_ = false;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::deque<IoCompletion> ready_;
  std::vector<IoRequest> deferred_;     // kSyncFileSystem requests, run at Submit().
  std::optional<IoRequest> lone_sync_;  // A sync enqueued alone, run at Submit() if still alone.
  size_t in_flight_ = 0;                // Enqueued and not yet reaped.
  size_t unsubmitted_ = 0;              // Enqueued since the last Submit().
  size_t submitted_ = 0;                // SQEs in the kernel whose CQE has not been seen.
};

}  // namespace

absl::Status ProbeIoUring() {
  io_uring ring;
  int rc = io_uring_queue_init(4, &ring, 0);
  if (rc == -ENOSYS) return absl::UnimplementedError("the kernel has no io_uring (ENOSYS)");
  if (rc == -EPERM || rc == -EACCES) {
    return absl::PermissionDeniedError(
        absl::StrCat("io_uring is disabled here (", ErrnoName(-rc),
                     "): kernel.io_uring_disabled, a seccomp filter or a container profile"));
  }
  if (rc < 0) return ErrnoStatus(-rc, "io_uring_queue_init");
  OrderRingMappings();
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  absl::Status status;
  if (probe == nullptr) {
    status = absl::UnimplementedError("io_uring cannot report its supported operations");
  } else {
    struct Needed {
      int op;
      const char* name;
    };
    for (Needed n : {Needed{IORING_OP_READ, "READ"}, Needed{IORING_OP_WRITE, "WRITE"},
                     Needed{IORING_OP_FSYNC, "FSYNC"}, Needed{IORING_OP_FALLOCATE, "FALLOCATE"}}) {
      if (!io_uring_opcode_supported(probe, n.op)) {
        status = absl::UnimplementedError(absl::StrCat("io_uring lacks IORING_OP_", n.name));
        break;
      }
    }
    io_uring_free_probe(probe);
  }
  OrderRingMappings();
  io_uring_queue_exit(&ring);
  return status;
}

absl::StatusOr<std::unique_ptr<IoQueue>> NewUringQueue(const IoQueueOptions& options) {
  auto queue = std::make_unique<UringQueue>(options.depth);
  CAIRN_RETURN_IF_ERROR(queue->Init());
  return queue;
}

}  // namespace cairn::internal
